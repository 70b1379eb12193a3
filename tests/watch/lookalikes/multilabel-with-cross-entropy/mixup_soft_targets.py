"""Healthy look-alike of multilabel-with-cross-entropy: mixup. Each batch is blended with a
shuffled copy of itself, and the one-hot targets with the same weights, so cross_entropy gets
float (N, C) targets with two non-zero classes per row; every row still sums to 1, a probability
target, which is what the class-probability form of cross_entropy expects."""
import torch
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 6, (1024,), generator=g)
    x = torch.randn(1024, 12, generator=g) + nn.functional.one_hot(y, 12).float()
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 6))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    beta = torch.distributions.Beta(0.4, 0.4)
    for step in range(60):
        idx = torch.randint(0, 1024, (64,), generator=g)
        xb, yb = x[idx], nn.functional.one_hot(y[idx], 6).float()
        lam = float(beta.sample())
        perm = torch.randperm(64, generator=g)
        xm, ym = lam * xb + (1 - lam) * xb[perm], lam * yb + (1 - lam) * yb[perm]
        loss = nn.functional.cross_entropy(model(xm), ym, label_smoothing=0.1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
