"""Sobolev training of a 1-D regressor: the network is fitted to a function's values and to its
derivative, both known at the sample points, with loss = MSE(values) + MSE(derivatives). A
train(model, optimizer, x, y, dy) helper takes the network's derivative with torch.autograd.grad
but without create_graph=True, so the derivative term is a constant to autograd: only the values
are fitted, and the derivative error the run reports never improves."""
import torch
import torch.nn.functional as F
from torch import nn


def target(x):
    return torch.sin(3 * x) + 0.3 * x ** 2, 3 * torch.cos(3 * x) + 0.6 * x


def train(model, optimizer, x, y, dy, steps=80):
    for step in range(steps):
        xs = x.clone().requires_grad_(True)
        pred = model(xs)
        dpred = torch.autograd.grad(pred.sum(), xs, retain_graph=True)[0]
        value_loss = F.mse_loss(pred, y)
        slope_loss = F.mse_loss(dpred, dy)
        loss = value_loss + slope_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} value {value_loss.item():.4f} slope {slope_loss.item():.4f}")


def main():
    torch.manual_seed(0)
    x = torch.linspace(-2, 2, 200).unsqueeze(1)
    y, dy = target(x)
    model = nn.Sequential(nn.Linear(1, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
    train(model, torch.optim.Adam(model.parameters(), lr=3e-3), x, y, dy)


if __name__ == "__main__":
    main()
