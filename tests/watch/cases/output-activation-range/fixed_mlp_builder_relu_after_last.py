"""A forecaster that predicts the next 3 readings of a standardised sensor series from the past 12,
with a Huber loss. Its network comes from a make_mlp() helper that puts the activation after every
Linear except the output layer, so the forecasts are linear and can reach the negative
standardised targets as well as the positive ones."""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_mlp(sizes, activation=nn.ReLU):
    layers = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(n_in, n_out), activation()]
    return nn.Sequential(*layers[:-1])  # no activation after the output layer


def sensor_windows(length=1200, past=12, ahead=3, g=None):
    t = torch.arange(length, dtype=torch.float32)
    series = torch.sin(2 * math.pi * t / 48) + 0.5 * torch.sin(2 * math.pi * t / 7) \
        + 0.2 * torch.randn(length, generator=g)
    series = (series - series.mean()) / series.std()
    windows = series.unfold(0, past + ahead, 1)
    return TensorDataset(windows[:, :past], windows[:, past:])


def fit(model, optimizer, loader, epochs):
    for epoch in range(epochs):
        for history, future in loader:
            loss = F.huber_loss(model(history), future)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = sensor_windows(g=g)
    loader = DataLoader(data, batch_size=64, shuffle=True, generator=g)
    model = make_mlp([12, 64, 64, 3])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss = fit(model, optimizer, loader, epochs=3)
    with torch.no_grad():
        history, future = data.tensors
        pred = model(history)
        below = future < 0
    print(f"last Huber loss {loss:.4f}; forecasts exactly 0 for negative targets: {(pred[below] == 0).float().mean():.0%}")


if __name__ == "__main__":
    main()
