"""A residual MLP with stochastic depth written by hand: each block's DropPath draws a per-example
keep mask with bernoulli_ and rescales by 1 / keep, only in training mode, so after model.eval()
the validation pass keeps every residual branch."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class DropPath(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        keep = 1.0 - self.p
        mask = x.new_empty(x.shape[0], 1).bernoulli_(keep)
        return x * mask / keep


class Block(nn.Module):
    def __init__(self, dim, drop_path):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.drop_path = DropPath(drop_path)

    def forward(self, x):
        return x + self.drop_path(self.mlp(self.norm(x)))


class ResMLP(nn.Module):
    def __init__(self, dim=32, depth=4, classes=4):
        super().__init__()
        self.stem = nn.Linear(12, dim)
        self.blocks = nn.Sequential(*[Block(dim, 0.1 * (i + 1)) for i in range(depth)])
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def evaluate(model, loader):
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for x, y in loader:
            total += F.cross_entropy(model(x), y, reduction="sum").item()
            n += len(y)
    return total / n


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1600, 12, generator=g)
    y = (x[:, :3].sum(1) > 0).long() * 2 + (x[:, 3] > 0).long()
    train = DataLoader(TensorDataset(x[:1280], y[:1280]), batch_size=64, shuffle=True, generator=g)
    val = DataLoader(TensorDataset(x[1280:], y[1280:]), batch_size=64)
    model = ResMLP()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    for epoch in range(3):
        model.train()
        for xb, yb in train:
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} val {evaluate(model, val):.3f}")


if __name__ == "__main__":
    main()
