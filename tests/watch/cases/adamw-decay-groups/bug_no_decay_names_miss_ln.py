"""A tiny GPT-style model whose LayerNorms are called ln_1, ln_2 and ln_f; the optimizer groups
come from a recipe that exempts parameters whose name contains "bias" or "LayerNorm.weight",
so every LayerNorm gain is decayed toward zero with weight_decay=0.1."""
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        h = self.ln_1(x)
        causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device).triu(1)  # True: not attended
        x = x + self.attn(h, h, h, attn_mask=causal, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab=64, d=32, n=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(*[Block(d) for _ in range(n)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        return self.head(self.ln_f(self.blocks(self.emb(idx))))


def param_groups(model, weight_decay, no_decay=("bias", "LayerNorm.weight")):
    return [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0},
    ]


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = TinyGPT()
    opt = torch.optim.AdamW(param_groups(model, 0.1), lr=3e-3)
    for step in range(60):
        idx = torch.randint(0, 64, (8, 16), generator=g)
        loss = F.cross_entropy(model(idx[:, :-1]).reshape(-1, 64), idx[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
