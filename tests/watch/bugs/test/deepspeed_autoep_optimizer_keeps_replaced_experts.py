"""A Hugging Face-style MoE fine-tuning run handed to a DeepSpeed-style engine with automatic expert
parallelism: the trainer builds AdamW from model.parameters() (create_optimizer, as when the engine
config has no optimizer block) and calls initialize(model, optimizer, config). The engine's
_configure_expert_parallel() swaps every MoE block (router + nn.ModuleList of expert MLPs) for an
AutoEPMoE module with a grouped-experts weight tensor, copying the weights over, and only then runs
_configure_optimizer(), which keeps the client optimizer as it is. The loop calls engine(batch),
engine.backward(loss) and engine.step() (step then zero_grad) on a token-classification task.

The client optimizer was built before the swap, so its parameter groups hold the discarded expert and
router tensors, while the live grouped-expert and router weights belong to no parameter group: they
get gradients but are never updated. The loss still falls because attention, embeddings, norms and
the head train normally. Nothing errors; the fix remaps the optimizer's groups to the new modules.

Thread: https://github.com/deepspeedai/DeepSpeed/pull/8377
"""
import torch
import torch.nn.functional as F
from torch import nn


class ExpertMLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.up, self.down = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.down(F.silu(self.up(x)))


class SparseMoeBlock(nn.Module):
    def __init__(self, dim, hidden, num_experts=4, top_k=2):
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.experts = nn.ModuleList(ExpertMLP(dim, hidden) for _ in range(num_experts))

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        weights, idx = self.gate(flat).softmax(-1).topk(self.top_k, dim=-1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            if tok.numel():
                out.index_add_(0, tok, weights[tok, slot, None] * expert(flat[tok]))
        return out.view_as(x)


class AutoEPMoE(nn.Module):
    """Expert-parallel replacement: the same router and experts, weights stacked per expert."""

    def __init__(self, block):
        super().__init__()
        self.top_k = block.top_k
        self.router = nn.Linear(block.gate.in_features, block.gate.out_features, bias=False)
        self.router.weight.data.copy_(block.gate.weight.data)
        ex = block.experts
        self.w_up = nn.Parameter(torch.stack([e.up.weight.data.t() for e in ex]).clone())
        self.b_up = nn.Parameter(torch.stack([e.up.bias.data for e in ex]).clone())
        self.w_down = nn.Parameter(torch.stack([e.down.weight.data.t() for e in ex]).clone())
        self.b_down = nn.Parameter(torch.stack([e.down.bias.data for e in ex]).clone())

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        weights, idx = self.router(flat).softmax(-1).topk(self.top_k, dim=-1)
        out = torch.zeros_like(flat)
        for e in range(self.w_up.shape[0]):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            if tok.numel():
                h = F.silu(flat[tok] @ self.w_up[e] + self.b_up[e]) @ self.w_down[e] + self.b_down[e]
                out.index_add_(0, tok, weights[tok, slot, None] * h)
        return out.view_as(x)


class DecoderLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(dim)
        self.self_attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.post_attention_layernorm = nn.LayerNorm(dim)
        self.mlp = SparseMoeBlock(dim, 2 * dim)

    def forward(self, x):
        h = self.input_layernorm(x)
        x = x + self.self_attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.post_attention_layernorm(x))


class MoeForTokenClassification(nn.Module):
    def __init__(self, vocab=40, dim=48, layers=2, heads=4, num_labels=4, seq_len=24):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(0.02 * torch.randn(1, seq_len, dim))
        self.layers = nn.ModuleList(DecoderLayer(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.score = nn.Linear(dim, num_labels)

    def forward(self, input_ids, labels=None):
        x = self.embed_tokens(input_ids) + self.pos
        for layer in self.layers:
            x = layer(x)
        logits = self.score(self.norm(x))
        loss = None if labels is None else F.cross_entropy(logits.flatten(0, 1), labels.flatten())
        return loss, logits


class Engine:
    def __init__(self, model, optimizer, config):
        self.module, self.config = model, config
        self._configure_expert_parallel(model)
        self.optimizer = self._configure_optimizer(optimizer)

    def _configure_expert_parallel(self, model):
        if not self.config.get("expert_parallel", {}).get("enabled"):
            return
        for layer in model.layers:
            if isinstance(layer.mlp, SparseMoeBlock):
                layer.mlp = AutoEPMoE(layer.mlp)

    def _configure_optimizer(self, client_optimizer):
        if client_optimizer is not None:
            return client_optimizer
        return torch.optim.AdamW(self.module.parameters(), **self.config["optimizer"]["params"])

    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def backward(self, loss):
        loss.backward()

    def step(self):
        torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.config["gradient_clipping"])
        self.optimizer.step()
        self.optimizer.zero_grad()


def initialize(model, optimizer, config):
    return Engine(model, optimizer, config)


def tagging_data(n, seed, vocab=40, seq_len=24):
    # label of a token = its vocabulary group, flipped when the previous token is in the upper half
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (n, seq_len), generator=g)
    prev = torch.cat([torch.zeros(n, 1, dtype=torch.long), ids[:, :-1]], dim=1)
    labels = (ids // 10 + 2 * (prev >= vocab // 2).long()) % 4
    return ids, labels


def main():
    torch.manual_seed(0)
    model = MoeForTokenClassification()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.0)   # create_optimizer()
    config = {"train_micro_batch_size_per_gpu": 32, "gradient_clipping": 1.0,
              "expert_parallel": {"enabled": True, "autoep_size": 1}}
    engine = initialize(model, optimizer, config)
    ids, labels = tagging_data(2560, 0)
    val_ids, val_labels = tagging_data(512, 1)
    bs, steps = config["train_micro_batch_size_per_gpu"], 0
    router0 = engine.module.layers[0].mlp.router.weight.detach().clone()
    for epoch in range(1):
        perm = torch.randperm(len(ids), generator=torch.Generator().manual_seed(epoch))
        for i in range(0, len(ids), bs):
            batch = perm[i:i + bs]
            loss, _ = engine(ids[batch], labels=labels[batch])
            engine.backward(loss)
            engine.step()
            steps += 1
            if steps % 10 == 0:
                print(f"step {steps} loss {loss.item():.4f}")
    engine.module.eval()
    with torch.no_grad():
        val_loss, logits = engine(val_ids, labels=val_labels)
    moved = (engine.module.layers[0].mlp.router.weight - router0).abs().max().item()
    print(f"eval loss {val_loss.item():.4f} acc {(logits.argmax(-1) == val_labels).float().mean():.3f} "
          f"router change {moved:.1e}")


if __name__ == "__main__":
    main()
