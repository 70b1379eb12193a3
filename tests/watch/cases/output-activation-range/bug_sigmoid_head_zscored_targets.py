"""A house-price regressor whose head ends in nn.Sigmoid, copied from a classifier, trained with
MSE on z-scored prices: about half the targets are negative and a sixth above 1, none of which a
sigmoid can output, so the loss stalls at its floor and the predictions pile up at 0 and 1."""
import torch
from torch import nn


class PriceModel(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 64), nn.ReLU(), nn.Linear(64, 1))
        self.act = nn.Sigmoid()

    def forward(self, x):
        return self.act(self.body(x)).squeeze(-1)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 10, generator=g)
    price = x[:, 0] * 3 + x[:, 1] ** 2 + torch.randn(2048, generator=g)
    y = (price - price.mean()) / price.std()
    model = PriceModel(10)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    for step in range(60):
        idx = torch.randint(0, 2048, (64,), generator=g)
        loss = loss_fn(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
