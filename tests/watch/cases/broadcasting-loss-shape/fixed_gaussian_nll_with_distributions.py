"""Heteroscedastic regression on a tabular set: a Trainer class feeds (features, target) batches
from a TensorDataset whose targets were stored as a column (y.unsqueeze(1), as many tabular
pipelines keep them), and the network's head returns a mean and a scale per row, squeezed to (N,).
The loss is the Gaussian negative log-likelihood written with torch.distributions:
-Normal(mu, sigma).log_prob(y).mean(), with the column target flattened first (y.squeeze(-1)), so
each row's distribution scores its own target: mu and y are both (N,)."""
import torch
from torch import nn
from torch.distributions import Normal
from torch.utils.data import DataLoader, TensorDataset


class GaussianHead(nn.Module):
    def __init__(self, features, hidden=64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.out = nn.Linear(hidden, 2)

    def forward(self, x):
        mu, raw_scale = self.out(self.body(x)).unbind(-1)
        return mu, nn.functional.softplus(raw_scale) + 1e-3


class Trainer:
    def __init__(self, model, loader, lr=2e-3):
        self.model, self.loader = model, loader
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def nll(self, x, y):
        mu, sigma = self.model(x)
        return -Normal(mu, sigma).log_prob(y.squeeze(-1)).mean()

    def fit(self, epochs):
        for epoch in range(epochs):
            for x, y in self.loader:
                self.optimizer.zero_grad()
                loss = self.nll(x, y)
                loss.backward()
                self.optimizer.step()
            print(f"epoch {epoch}: nll {loss.item():.3f}")


def make_table(n=2048, g=None):
    x = torch.randn(n, 8, generator=g)
    y = 2.0 * x[:, 0] - x[:, 1] + (0.2 + 0.5 * x[:, 2].abs()) * torch.randn(n, generator=g)
    return x, y.unsqueeze(1)


if __name__ == "__main__":
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    x, y = make_table(g=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, generator=g)
    Trainer(GaussianHead(8), loader).fit(epochs=2)
