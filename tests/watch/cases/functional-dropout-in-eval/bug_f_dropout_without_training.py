"""An MLP classifier whose forward applies F.dropout(x, p=0.5) between layers without passing
training=self.training; the train() helper evaluates on a held-out set after every few steps
under model.eval() and no_grad, where the dropout keeps dropping half the units."""
import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(20, 128), nn.Linear(128, 128), nn.Linear(128, 5)

    def forward(self, x):
        x = F.dropout(F.relu(self.fc1(x)), p=0.5)
        x = F.dropout(F.relu(self.fc2(x)), p=0.5)
        return self.fc3(x)


def evaluate(model, x, y):
    model.eval()
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    model.train()
    return acc


def train(model, optimizer, data, val, steps=60):
    x, y = data
    for step in range(steps):
        i = (step * 32) % len(x)
        loss = F.cross_entropy(model(x[i:i + 32]), y[i:i + 32])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 5 == 0:
            print(f"step {step} loss {loss.item():.3f} val acc {evaluate(model, *val):.3f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(20, 5, generator=g)
    x = torch.randn(800, 20, generator=g)
    y = (x @ w).argmax(1)
    model = MLP()
    train(model, torch.optim.Adam(model.parameters(), lr=1e-3), (x[:640], y[:640]), (x[640:], y[640:]))


if __name__ == "__main__":
    main()
