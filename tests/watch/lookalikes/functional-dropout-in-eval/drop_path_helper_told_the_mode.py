"""Healthy look-alike of functional-dropout-in-eval: stochastic depth written as a module-level
function in the timm style, `drop_path(x, drop_prob, training)`, which returns x unchanged when
training is False and otherwise draws one Bernoulli keep mask per sample. Each residual block
passes its own self.training, so evaluation runs every block."""
import torch
import torch.nn.functional as F
from torch import nn


def drop_path(x, drop_prob: float = 0.0, training: bool = False):
    if drop_prob == 0.0 or not training:
        return x
    keep = 1 - drop_prob
    mask = x.new_empty((x.shape[0],) + (1,) * (x.dim() - 1)).bernoulli_(keep)
    return x * mask / keep


class Block(nn.Module):
    def __init__(self, dim, drop_prob):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.drop_prob = drop_prob

    def forward(self, x):
        return x + drop_path(self.mlp(self.norm(x)), self.drop_prob, self.training)


class ResMLP(nn.Module):
    def __init__(self, dim=48, depth=4, classes=5):
        super().__init__()
        self.stem = nn.Linear(16, dim)
        self.blocks = nn.Sequential(*[Block(dim, 0.1 * (i + 1) / depth) for i in range(depth)])
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(16, 5, generator=g)
    x = torch.randn(1500, 16, generator=g)
    y = (x @ w).argmax(1)
    model = ResMLP()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    for epoch in range(2):
        model.train()
        for i in range(0, 1280, 20):
            loss = F.cross_entropy(model(x[i:i + 20]), y[i:i + 20])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            acc = (model(x[1280:]).argmax(1) == y[1280:]).float().mean().item()
        print(f"epoch {epoch} loss {loss.item():.3f} val acc {acc:.3f}")


if __name__ == "__main__":
    main()
