"""Healthy: a hand-written SGD loop (no torch.optim) that accumulates gradients over 4
micro-batches, applies one update, then sets every .grad to None. Between the accumulating
backward() calls the parameters do not change, and after each update the gradients are gone."""
import torch
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=g)
    y = (x[:, 0] - x[:, 1]).unsqueeze(1)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    accumulate, lr = 4, 0.05
    for epoch in range(3):
        for i, start in enumerate(range(0, 512, 16)):
            loss = ((model(x[start:start + 16]) - y[start:start + 16]) ** 2).mean() / accumulate
            loss.backward()
            if (i + 1) % accumulate == 0:
                with torch.no_grad():
                    for p in model.parameters():
                        p.add_(p.grad, alpha=-lr)
                        p.grad = None
        print(f"epoch {epoch} loss {loss.item() * accumulate:.4f}")


if __name__ == "__main__":
    main()
