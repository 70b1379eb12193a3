"""A Regressor class that stacks ten Linear + Sigmoid blocks with torch's default init and trains
them with Adam through fit(): each sigmoid passes back at most a quarter of the gradient, so by
the first layer the gradient is about eleven orders of magnitude below the head's, the early
layers never move, and the loss sits at the variance of the targets (vanishing gradients)."""
import torch
from torch import nn


class Regressor(nn.Module):
    def __init__(self, features, width, depth):
        super().__init__()
        blocks, size = [], features
        for _ in range(depth):
            blocks += [nn.Linear(size, width), nn.Sigmoid()]
            size = width
        self.body = nn.Sequential(*blocks)
        self.out = nn.Linear(width, 1)

    def forward(self, x):
        return self.out(self.body(x)).squeeze(-1)


def fit(model, optimizer, x, y, steps, batch):
    g = torch.Generator().manual_seed(1)
    for step in range(steps):
        idx = torch.randint(0, len(x), (batch,), generator=g)
        loss = nn.functional.mse_loss(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    x = torch.randn(2048, 16)
    y = torch.sin(x[:, 0]) + x[:, 1] * x[:, 2]
    model = Regressor(16, 64, depth=10)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    print(f"loss {fit(model, optimizer, x, y, steps=60, batch=64):.3f}")


if __name__ == "__main__":
    main()
