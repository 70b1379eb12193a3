"""A delivery-time regressor on tabular features that predicts a mean and a variance, trained with
a hand-written Gaussian negative log-likelihood through a train() helper with gradient
accumulation. The config keeps the variance positive with a softplus, which never outputs exactly
0, so log(var) and the squared error over var stay finite and the likelihood improves."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CONFIG = {
    "hidden": 64,
    "lr": 3e-3,
    "batch_size": 32,
    "accumulate": 2,
    "epochs": 4,
    "variance_activation": "softplus",   # keeps the predicted variance > 0
}
POSITIVE = {"relu": F.relu, "softplus": F.softplus}


class MeanVarianceNet(nn.Module):
    def __init__(self, features, hidden, variance_activation):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.mean = nn.Linear(hidden, 1)
        self.raw_var = nn.Linear(hidden, 1)
        self.positive = POSITIVE[variance_activation]

    def forward(self, x):
        h = self.body(x)
        return self.mean(h).squeeze(-1), self.positive(self.raw_var(h)).squeeze(-1)


def gaussian_nll(mean, var, target):
    return 0.5 * (torch.log(var) + (target - mean) ** 2 / var).mean()


def train(model, optimizer, loader, cfg):
    for epoch in range(cfg["epochs"]):
        for i, (x, y) in enumerate(loader):
            mean, var = model(x)
            loss = gaussian_nll(mean, var, y) / cfg["accumulate"]
            loss.backward()
            if (i + 1) % cfg["accumulate"] == 0:
                optimizer.step()
                optimizer.zero_grad()
    return loss.item() * cfg["accumulate"]


def make_orders(n=512, g=None):
    """Distance, items, hour and courier load, standardised; busier orders are noisier."""
    x = torch.randn(n, 4, generator=g)
    noise = 0.2 + 0.5 * torch.sigmoid(2 * x[:, 3])
    y = 1.5 * x[:, 0] + 0.5 * x[:, 1] - 0.3 * x[:, 2] ** 2 + noise * torch.randn(n, generator=g)
    return TensorDataset(x, y)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    loader = DataLoader(make_orders(g=g), batch_size=CONFIG["batch_size"], shuffle=True, generator=g)
    model = MeanVarianceNet(4, CONFIG["hidden"], CONFIG["variance_activation"])
    optimizer = torch.optim.Adam(model.parameters(), lr=CONFIG["lr"])
    print(f"final negative log-likelihood {train(model, optimizer, loader, CONFIG):.3f}")


if __name__ == "__main__":
    main()
