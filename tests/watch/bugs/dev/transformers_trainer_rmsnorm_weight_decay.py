"""Training a small LLaMA-style causal LM with a Hugging Face-style Trainer and weight_decay=0.1.
Trainer.create_optimizer puts every parameter in the decayed AdamW group except biases and the
parameters of modules whose type is in ALL_LAYERNORM_LAYERS, here only nn.LayerNorm. The model
implements its own RMSNorm class, as the LLaMA and Qwen2 code does, and the exclusion is by type
only, so it misses it: every RMSNorm gain (input_layernorm, post_attention_layernorm, the final
norm) sits in the decayed group and is pulled toward zero with the weight matrices.

Thread: https://github.com/huggingface/transformers/pull/35927
"""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, SEQ = 48, 32
ALL_LAYERNORM_LAYERS = [nn.LayerNorm]


@dataclass
class TrainingArguments:
    learning_rate: float = 3e-3
    weight_decay: float = 0.1
    max_steps: int = 120
    per_device_train_batch_size: int = 16
    warmup_steps: int = 10
    max_grad_norm: float = 1.0
    logging_steps: int = 10


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class DecoderLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(dim), RMSNorm(dim)
        self.self_attn = nn.MultiheadAttention(dim, 4, bias=False, batch_first=True)
        self.gate_proj, self.up_proj = nn.Linear(dim, 2 * dim, bias=False), nn.Linear(dim, 2 * dim, bias=False)
        self.down_proj = nn.Linear(2 * dim, dim, bias=False)

    def forward(self, h, mask):
        a = self.input_layernorm(h)
        h = h + self.self_attn(a, a, a, attn_mask=mask, need_weights=False)[0]
        m = self.post_attention_layernorm(h)
        return h + self.down_proj(F.silu(self.gate_proj(m)) * self.up_proj(m))


class DecoderForCausalLM(nn.Module):
    def __init__(self, dim=64, layers=2):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, dim)
        self.pos = nn.Parameter(torch.randn(SEQ, dim) * 0.02)
        self.layers = nn.ModuleList(DecoderLayer(dim) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, VOCAB, bias=False)

    def forward(self, input_ids, labels=None):
        T = input_ids.size(1)
        mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        h = self.embed_tokens(input_ids) + self.pos[:T]
        for layer in self.layers:
            h = layer(h, mask)
        logits = self.lm_head(self.norm(h))
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
        return {"loss": loss, "logits": logits}


def get_parameter_names(model, forbidden_layer_types):
    names = []
    for child_name, child in model.named_children():
        names += [f"{child_name}.{n}" for n in get_parameter_names(child, forbidden_layer_types)
                  if not isinstance(child, tuple(forbidden_layer_types))]
    return names + list(model._parameters.keys())


class Trainer:
    def __init__(self, model, args, train_dataset):
        self.model, self.args, self.train_dataset = model, args, train_dataset

    def get_decay_parameter_names(self, model):
        return [n for n in get_parameter_names(model, ALL_LAYERNORM_LAYERS) if "bias" not in n]

    def create_optimizer(self):
        decay = self.get_decay_parameter_names(self.model)
        groups = [
            {"params": [p for n, p in self.model.named_parameters() if n in decay and p.requires_grad],
             "weight_decay": self.args.weight_decay},
            {"params": [p for n, p in self.model.named_parameters() if n not in decay and p.requires_grad],
             "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=self.args.learning_rate, betas=(0.9, 0.95))

    def train(self):
        args, model = self.args, self.model
        optimizer = self.create_optimizer()
        warm = args.warmup_steps
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: min((s + 1) / warm, max(0.0, (args.max_steps - s) / (args.max_steps - warm))))
        g = torch.Generator().manual_seed(1)
        model.train()
        for step in range(1, args.max_steps + 1):
            idx = torch.randint(0, len(self.train_dataset), (args.per_device_train_batch_size,), generator=g)
            batch = self.train_dataset[idx]
            loss = model(input_ids=batch, labels=batch)["loss"]
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            if step % args.logging_steps == 0:
                print(f"step {step} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.2e}")


def token_data(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    trans = torch.randint(0, VOCAB, (VOCAB, 3), generator=torch.Generator().manual_seed(5))
    seq = torch.empty(n, SEQ, dtype=torch.long)
    seq[:, 0] = torch.randint(0, VOCAB, (n,), generator=g)
    for t in range(1, SEQ):
        seq[:, t] = trans[seq[:, t - 1], torch.randint(0, 3, (n,), generator=g)]
    return seq


def main():
    torch.manual_seed(0)
    Trainer(DecoderForCausalLM(), TrainingArguments(), token_data(2048)).train()


if __name__ == "__main__":
    main()
