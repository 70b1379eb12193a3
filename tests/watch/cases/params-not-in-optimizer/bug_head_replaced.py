"""Fine-tuning: the trainer builds its optimizer, then the head is swapped for one with the task's
number of classes. The new head gets gradients at every step and never changes."""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, features=16, hidden=32, classes=10):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.head(self.body(x))


class Trainer:
    def __init__(self, model, lr=0.05):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.criterion = nn.CrossEntropyLoss()

    def adapt_head(self, classes):
        self.model.head = nn.Linear(self.model.head.in_features, classes)

    def _clear_grads(self):
        self.optimizer.zero_grad()

    def train_step(self, x, y):
        self._clear_grads()
        loss = self.criterion(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()


def make_data(n=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    return x, y


def main():
    torch.manual_seed(0)
    trainer = Trainer(Net())
    trainer.adapt_head(3)
    x, y = make_data()
    for step in range(60):
        i = (step * 32) % len(x)
        loss = trainer.train_step(x[i:i + 32], y[i:i + 32])
    print(f"final loss {loss:.3f}")


if __name__ == "__main__":
    main()
