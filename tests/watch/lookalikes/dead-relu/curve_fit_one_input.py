"""Healthy: a wide ReLU MLP fitted to a noisy curve of one variable, the whole set of 32 points
as one batch, Adam at lr 0.01. With one input value per example the examples lie on a line, so a
large share of the second layer's units is negative over the whole range from the start and more
after a few steps: zero for every example, as dead units are, while the fit goes on improving."""
import math

import torch
from torch import nn


def main(seed=4):
    torch.manual_seed(seed)
    x = torch.linspace(-1, 1, 32).unsqueeze(1)
    y = torch.sin(math.pi * x) + 0.2 * torch.randn(32, 1)
    net = nn.Sequential(nn.Linear(1, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    for step in range(100):
        loss = nn.functional.mse_loss(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 0:
            first = loss.item()
    print(f"mse {first:.3f} -> {loss.item():.3f}")


if __name__ == "__main__":
    main()
