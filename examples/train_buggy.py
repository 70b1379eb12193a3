"""A small classifier on synthetic data that trains without an error and does not learn.

It holds three of the knowledge base's mistakes, the kind that hide in a real training
script; `kb lint examples/train_buggy.py` finds them in the code, `kb search --from-lint`
lists their entries, and `kb watch -- python examples/train_buggy.py` sees them at run time.
Run it with `python examples/train_buggy.py` (torch, CPU, a few seconds): the loss stays
where it started. The README's `kb lint` and `kb watch` examples are generated from this file.
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(nn.Module):
    def __init__(self, features: int = 20, hidden: int = 64, classes: int = 4):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Dropout(0.2))
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        logits = self.head(self.body(x))
        return F.softmax(logits, dim=1)


def make_data(n: int = 2048, features: int = 20, classes: int = 4, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, features, generator=g) * 2
    y = torch.randint(0, classes, (n,), generator=g)
    x = centers[y] + torch.randn(n, features, generator=g)
    return TensorDataset(x, y)


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(dim=1) == y).sum().item()
            total += len(y)
    return correct / total


def main(epochs: int = 5):
    torch.manual_seed(0)
    train_loader = DataLoader(make_data(seed=0), batch_size=64, shuffle=True)
    val_loader = DataLoader(make_data(512, seed=1), batch_size=256)
    model = Classifier()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    model.train()
    for epoch in range(epochs):
        running = 0.0
        for x, y in train_loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.zero_grad()
            optimizer.step()
            running += loss.item()
        print(f"epoch {epoch}: train loss {running / len(train_loader):.3f}, "
              f"val accuracy {evaluate(model, val_loader):.2f}")


if __name__ == "__main__":
    main()
