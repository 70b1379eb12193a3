"""A DeepSpeed-Chat style fine-tuning step: get_optimizer_grouped_parameters(model, weight_decay,
no_decay_name_list=("bias", "LayerNorm.weight")) splits the parameters into a decayed and a
non-decayed group by substring match on their names, and AdamW is built from the groups. The model
is OPT-like, and its norms are named self_attn_layer_norm and final_layer_norm, so no
"LayerNorm.weight" ever matches: every norm gain lands in the decayed group and is pulled toward
zero along with the weight matrices.

Thread: https://github.com/deepspeedai/DeepSpeedExamples/pull/755
"""
import torch
import torch.nn.functional as F
from torch import nn


class OPTDecoderLayer(nn.Module):
    def __init__(self, dim, heads, ffn):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.self_attn_layer_norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, ffn)
        self.fc2 = nn.Linear(ffn, dim)
        self.final_layer_norm = nn.LayerNorm(dim)

    def forward(self, x, mask):
        h = self.self_attn_layer_norm(x)
        x = x + self.self_attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.fc2(F.relu(self.fc1(self.final_layer_norm(x))))


class OPTForCausalLM(nn.Module):
    def __init__(self, vocab=64, dim=64, heads=4, ffn=128, layers=2, max_len=32):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.embed_positions = nn.Embedding(max_len, dim)
        self.layers = nn.ModuleList([OPTDecoderLayer(dim, heads, ffn) for _ in range(layers)])
        self.final_layer_norm = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, input_ids, labels):
        T = input_ids.shape[1]
        mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        x = self.embed_tokens(input_ids) + self.embed_positions(torch.arange(T))
        for layer in self.layers:
            x = layer(x, mask)
        logits = self.lm_head(self.final_layer_norm(x))
        return F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())


def get_optimizer_grouped_parameters(model, weight_decay, no_decay_name_list=("bias", "LayerNorm.weight")):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        exempt = any(key in name for key in no_decay_name_list)
        (no_decay if exempt else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def sft_batches(n_batches, batch_size=16, seq_len=24, vocab=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    shift = torch.randint(1, vocab, (1,), generator=torch.Generator().manual_seed(6)).item()
    out = []
    for _ in range(n_batches):
        start = torch.randint(0, vocab, (batch_size, 1), generator=g)
        ids = (start + shift * torch.arange(seq_len)) % vocab
        out.append(ids)
    return out


def main():
    torch.manual_seed(0)
    model = OPTForCausalLM()
    groups = get_optimizer_grouped_parameters(model, weight_decay=0.1)
    norm_weights_decayed = [n for n, p in model.named_parameters()
                            if "layer_norm.weight" in n and any(p is q for q in groups[0]["params"])]
    print(f"decayed tensors: {len(groups[0]['params'])}, non-decayed: {len(groups[1]['params'])}; "
          f"norm gains in the decayed group: {norm_weights_decayed}")
    optimizer = torch.optim.AdamW(groups, lr=3e-3, betas=(0.9, 0.95))
    for epoch in range(2):
        model.train()
        for step, batch in enumerate(sft_batches(40, seed=epoch)):
            loss = model(input_ids=batch, labels=batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if step % 20 == 0:
                gain = model.layers[0].self_attn_layer_norm.weight.mean().item()
                print(f"epoch {epoch} step {step} loss {loss.item():.4f} layer-0 norm gain mean {gain:.4f}")


if __name__ == "__main__":
    main()
