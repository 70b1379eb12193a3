"""A from-scratch training loop without torch.optim: the update is written by hand over
model.parameters() under no_grad, and nothing clears .grad between iterations, so every update
applies the sum of all gradients computed so far."""
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x):
        return self.net(x)


def sgd_update(model, lr):
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 10, generator=g)
    y = x[:, :3].sum(1, keepdim=True) + 0.1 * torch.randn(512, 1, generator=g)
    model = MLP()
    for epoch in range(4):
        for i in range(0, 512, 32):
            pred = model(x[i:i + 32])
            loss = ((pred - y[i:i + 32]) ** 2).mean()
            loss.backward()
            sgd_update(model, lr=0.01)
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
