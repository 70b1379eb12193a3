"""Healthy look-alike of functional-dropout-in-eval: a Bayesian-by-dropout regressor whose forward
calls F.dropout(x, p, training=True) on purpose, so that every prediction, in training and at test
time, is one sample of the approximate posterior; predict() averages 30 samples and reports their
spread. The flag is written out: the dropout is meant to ignore model.eval()."""
import torch
import torch.nn.functional as F
from torch import nn


class MCDropoutRegressor(nn.Module):
    def __init__(self, p=0.1):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(8, 64), nn.Linear(64, 64), nn.Linear(64, 1)
        self.p = p

    def forward(self, x):
        x = F.dropout(F.relu(self.fc1(x)), self.p, training=True)
        x = F.dropout(F.relu(self.fc2(x)), self.p, training=True)
        return self.fc3(x).squeeze(1)


def predict(model, x, samples=30):
    model.eval()
    with torch.no_grad():
        draws = torch.stack([model(x) for _ in range(samples)])
    model.train()
    return draws.mean(0), draws.std(0)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(8, generator=g)
    x = torch.randn(1600, 8, generator=g)
    y = torch.sin(x @ w) + 0.1 * torch.randn(1600, generator=g)
    model = MCDropoutRegressor()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(2):
        for i in range(0, 1280, 16):
            loss = F.mse_loss(model(x[i:i + 16]), y[i:i + 16])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        mean, spread = predict(model, x[1280:])
        print(f"epoch {epoch} val mse {F.mse_loss(mean, y[1280:]).item():.3f} mean spread {spread.mean().item():.3f}")


if __name__ == "__main__":
    main()
