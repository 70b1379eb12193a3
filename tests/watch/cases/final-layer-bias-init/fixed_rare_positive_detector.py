"""The same fraud detector with build_model() setting the output bias to the log-odds of the
positive rate: the first loss is already about the labels' entropy, not ln 2."""
import torch
from torch import nn


def make_data(n, g):
    x = torch.randn(n, 16, generator=g)
    score = x[:, 0] + 0.5 * x[:, 1] + 0.3 * torch.randn(n, generator=g)
    y = (score > 2.1).float()  # about 4% positives
    return x, y


def build_model(positive_rate):
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    with torch.no_grad():
        model[-1].weight.mul_(0.01)
        model[-1].bias.fill_(float(torch.log(positive_rate / (1 - positive_rate))))
    return model


def fit(model, x, y, steps, batch=128):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.BCEWithLogitsLoss()
    for _ in range(steps):
        idx = torch.randint(0, len(x), (batch,))
        loss = loss_fn(model(x[idx]).squeeze(1), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x, y = make_data(8192, g)
    model = build_model(y.mean())
    print(f"positives {y.mean():.3f}, loss {fit(model, x, y, 60):.3f}")


if __name__ == "__main__":
    main()
