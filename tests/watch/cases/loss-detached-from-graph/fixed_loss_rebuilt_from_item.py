"""The loss helper returns the loss tensor itself, with its autograd history, so backward()
reaches every parameter."""
import torch
from torch import nn
import torch.nn.functional as F


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


def compute_loss(pred, target):
    return F.smooth_l1_loss(pred, target)


def run_epoch(model, optimizer, data, batch=32):
    x, y = data
    for i in range(0, len(x), batch):
        optimizer.zero_grad()
        loss = compute_loss(model(x[i:i + batch]), y[i:i + batch])
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    x = torch.randn(320, 10)
    y = x[:, 0] * 2 - x[:, 1]
    model = Regressor()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(5):
        loss = run_epoch(model, optimizer, (x, y))
    print(f"loss after 5 epochs {loss:.3f}")


if __name__ == "__main__":
    main()
