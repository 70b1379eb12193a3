"""The fixed twin: five output units and cross_entropy on the integer labels."""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 32), nn.ReLU())
        self.out = nn.Linear(32, 5)

    def forward(self, x):
        return self.out(self.body(x))


def train_step(model, optimizer, criterion, x, y):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 5, (1024,), generator=g)
    x = torch.randn(1024, 10, generator=g) + nn.functional.one_hot(y, 10).float() * 2
    model = Net(10)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    for step in range(60):
        idx = torch.randint(0, 1024, (64,), generator=g)
        loss = train_step(model, optimizer, criterion, x[idx], y[idx])
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
