"""A fraud detector on tabular features, about 4% positives, trained with BCEWithLogitsLoss by a
fit() helper; its output layer keeps PyTorch's default init, so every first prediction is about
0.5 and the first loss is about ln 2 = 0.69, while the labels' entropy is about 0.17: the first
steps only learn that positives are rare."""
import torch
from torch import nn


def make_data(n, g):
    x = torch.randn(n, 16, generator=g)
    score = x[:, 0] + 0.5 * x[:, 1] + 0.3 * torch.randn(n, generator=g)
    y = (score > 2.1).float()  # about 4% positives
    return x, y


def build_model():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))


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
    model = build_model()
    print(f"positives {y.mean():.3f}, loss {fit(model, x, y, 60):.3f}")


if __name__ == "__main__":
    main()
