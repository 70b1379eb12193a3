"""Healthy look-alike of clip-threshold-too-small: SGD with clip_grad_norm_(max_norm=1.0) on a
regression whose first steps have large gradients (the targets are far from the initial output).
Clipping acts on those early steps and then stops, as a safety net should."""
import torch
from torch import nn


def main():
    torch.manual_seed(0)
    x = torch.randn(2048, 8)
    y = x @ torch.randn(8, 1) + 4.0
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(120):
        idx = torch.randint(0, 2048, (64,))
        loss = nn.functional.mse_loss(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
