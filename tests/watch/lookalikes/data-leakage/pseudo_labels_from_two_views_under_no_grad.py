"""Healthy look-alike of data-leakage: self-training with pseudo-labels. Each step first predicts
the batch twice under no_grad (the rows as they are and a flipped view), averages and sharpens the
two predictions into soft targets, then trains the same model on those rows with grad enabled. The
no_grad calls read training rows because they are part of the training step, not an evaluation."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(24, 4, generator=g)
    x = torch.randn(1024, 24, generator=g)
    y = (x @ w).argmax(1)
    labelled = DataLoader(TensorDataset(x[:128], y[:128]), batch_size=16, shuffle=True)
    unlabelled = DataLoader(TensorDataset(x[128:]), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 4))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(5):
        for (xl, yl), (xu,) in zip(labelled, unlabelled):
            with torch.no_grad():
                p = (F.softmax(model(xu), -1) + F.softmax(model(xu.flip(1)), -1)) / 2
                targets = p ** 2 / (p ** 2).sum(1, keepdim=True)
            loss = F.cross_entropy(model(xl), yl) + F.cross_entropy(model(xu), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
