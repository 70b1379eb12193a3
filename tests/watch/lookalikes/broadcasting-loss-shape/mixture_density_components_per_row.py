"""Healthy look-alike of broadcasting-loss-shape: a mixture density network predicts K Gaussian
components per row (means and scales of shape (N, K), mixing logits (N, K)) and scores each row's
target, kept as an (N, 1) column, against its own K components: Normal(mu, sigma).log_prob(y) is
(N, K) by design, one score per component of the same row, then logsumexp with the log mixing
weights gives the row's log-likelihood. The broadcast adds no pairs across rows."""
import torch
from torch import nn
from torch.distributions import Normal
from torch.utils.data import DataLoader, TensorDataset

K = 4


class MDN(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(1, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.head = nn.Linear(hidden, 3 * K)

    def forward(self, x):
        logits, mu, raw = self.head(self.body(x)).chunk(3, dim=-1)
        return logits, mu, nn.functional.softplus(raw) + 1e-3


def mdn_nll(logits, mu, sigma, y):
    scores = Normal(mu, sigma).log_prob(y) + logits.log_softmax(-1)   # (N, K): each row's own components
    return -torch.logsumexp(scores, dim=-1).mean()


def main():
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    x = torch.rand(4096, 1, generator=g) * 2 - 1
    branch = torch.randint(0, 2, (4096, 1), generator=g) * 2 - 1
    y = branch * x.abs().sqrt() + 0.05 * torch.randn(4096, 1, generator=g)        # two branches per x
    loader = DataLoader(TensorDataset(x, y), batch_size=128, shuffle=True, generator=g)
    model = MDN()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(2):
        for xb, yb in loader:
            loss = mdn_nll(*model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(epoch, loss.item())


if __name__ == "__main__":
    main()
