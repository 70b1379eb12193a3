"""Healthy: a ten-class classifier on balanced labels; its first loss is about ln 10, which is
also the entropy of its label prior: a default-initialised head is already at the prior."""
import torch
from torch import nn


def main():
    torch.manual_seed(0)
    centers = torch.randn(10, 32)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(60):
        y = torch.randint(0, 10, (64,))
        x = centers[y] + torch.randn(64, 32)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
