"""The fixed twin: a linear output (no activation on the head), which can reach every target."""
import torch
from torch import nn


class PriceModel(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x):
        return self.body(x).squeeze(-1)


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
