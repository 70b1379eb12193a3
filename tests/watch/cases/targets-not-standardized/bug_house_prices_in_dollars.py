"""A house-price regressor trained with MSE and Adam directly on prices in dollars (about 300,000,
spread 60,000) from standardised features: the untrained network outputs values near 0, the
first loss is around 1e11, and Adam's steps of about lr per weight leave the predictions far
below the prices for the whole run (R^2 below 0)."""
import torch
from torch import nn


def fit(model, optimizer, x, y, steps, g):
    for step in range(steps):
        idx = torch.randint(0, len(x), (64,), generator=g)
        loss = nn.functional.mse_loss(model(x[idx]).squeeze(-1), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 6, generator=g)
    price = 300_000 + 60_000 * (0.8 * x[:, 0] + 0.4 * x[:, 1] * x[:, 2] + 0.2 * torch.randn(2048, generator=g))
    model = nn.Sequential(nn.Linear(6, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    print(f"loss {fit(model, optimizer, x, price, 60, g):.3g}")


if __name__ == "__main__":
    main()
