"""A digit-like classifier built after a binary tutorial: one output unit and BCEWithLogitsLoss,
trained on integer labels 0..4 cast to float. For every label above 1 the loss falls without
bound as the logit grows, so the loss goes negative and keeps falling while accuracy stays at
chance (a multi-class problem under a binary loss)."""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 32), nn.ReLU())
        self.out = nn.Linear(32, 1)

    def forward(self, x):
        return self.out(self.body(x)).squeeze(1)


def train_step(model, optimizer, criterion, x, y):
    optimizer.zero_grad()
    loss = criterion(model(x), y.float())
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
    criterion = nn.BCEWithLogitsLoss()
    for step in range(60):
        idx = torch.randint(0, 1024, (64,), generator=g)
        loss = train_step(model, optimizer, criterion, x[idx], y[idx])
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
