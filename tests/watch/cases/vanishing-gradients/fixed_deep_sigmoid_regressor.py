"""The fixed twin: the same ten blocks with ReLU and a Kaiming (fan-in) init, whose gain keeps
the gradient at the same scale through every layer, so all of them train."""
import torch
from torch import nn


class Regressor(nn.Module):
    def __init__(self, features, width, depth):
        super().__init__()
        blocks, size = [], features
        for _ in range(depth):
            layer = nn.Linear(size, width)
            nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            blocks += [layer, nn.ReLU()]
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
