"""A configurable-depth MLP that keeps its hidden layers in an nn.ModuleList built in a loop, so
model.parameters() and the optimizer made from it hold every layer."""
import torch
import torch.nn.functional as F
from torch import nn


class DeepMLP(nn.Module):
    def __init__(self, d_in=10, width=48, depth=3, classes=4):
        super().__init__()
        self.inp = nn.Linear(d_in, width)
        self.hidden = nn.ModuleList()
        for _ in range(depth):
            self.hidden.append(nn.Linear(width, width))
        self.out = nn.Linear(width, classes)

    def forward(self, x):
        x = F.relu(self.inp(x))
        for layer in self.hidden:
            x = F.relu(layer(x))
        return self.out(x)


def train(model, optimizer, x, y, steps=60, batch=32):
    for step in range(steps):
        i = (step * batch) % len(x)
        loss = F.cross_entropy(model(x[i:i + batch]), y[i:i + batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(960, 10, generator=g)
    y = (x[:, :4] @ torch.randn(4, 4, generator=g)).argmax(1)
    model = DeepMLP()
    train(model, torch.optim.Adam(model.parameters(), lr=1e-3), x, y)


if __name__ == "__main__":
    main()
