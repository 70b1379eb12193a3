"""A learning-rate range test (the lr-range-test entry): the learning rate grows exponentially from
1e-5 to 10 over 60 steps and the loss is recorded until it blows up. The loss rising under huge
steps is the point of the sweep, not a bug: the learning rate rose on purpose between the first
loss and the blow-up, so nothing is reported."""
import math

import torch
from torch import nn


def lr_find(model, optimizer, x, y, start=1e-5, end=10.0, steps=60):
    factor = (end / start) ** (1 / (steps - 1))
    for group in optimizer.param_groups:
        group["lr"] = start
    history = []
    for step in range(steps):
        idx = torch.randint(0, len(x), (64,))
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append((optimizer.param_groups[0]["lr"], loss.item()))
        if not math.isfinite(loss.item()):
            break
        for group in optimizer.param_groups:
            group["lr"] *= factor
    return history


def main():
    torch.manual_seed(0)
    x = torch.randn(2048, 32)
    y = (x[:, :4].sum(1) > 0).long() + 2 * (x[:, 4:8].sum(1) > 0).long()
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 4))
    history = lr_find(model, torch.optim.SGD(model.parameters(), lr=1e-5, momentum=0.9), x, y)
    best = min(history, key=lambda h: h[1])
    print(f"lowest loss {best[1]:.3g} at lr {best[0]:.2g}; last {history[-1]}")


if __name__ == "__main__":
    main()
