"""The fixed twin of bug_validate_leaves_eval_after_a_long_epoch.py: train_epoch() puts the model
back in training mode before its first batch, so validate()'s eval() holds only for validation."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class TabularNet(nn.Module):
    def __init__(self, features=16, classes=4):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.3),
                                  nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3))
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        return self.head(self.body(x))


class Trainer:
    def __init__(self, model, train_loader, val_loader, lr=0.05):
        self.model, self.train_loader, self.val_loader = model, train_loader, val_loader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
        self.criterion = nn.CrossEntropyLoss()
        self.history = []

    def train_epoch(self):
        self.model.train()
        total = 0.0
        for x, y in self.train_loader:
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(x), y)
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        return total / len(self.train_loader)

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        correct = 0
        for x, y in self.val_loader:
            correct += (self.model(x).argmax(1) == y).sum().item()
        return correct / len(self.val_loader.dataset)

    def fit(self, epochs):
        for epoch in range(epochs):
            loss = self.train_epoch()
            accuracy = self.validate()
            self.history.append((loss, accuracy))
            print(f"epoch {epoch}: train loss {loss:.3f}, val accuracy {accuracy:.3f}")


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    y = (x[:, 0] > 0).long() * 2 + (x[:, 1] + 0.5 * x[:, 2] > 0).long()
    return TensorDataset(x, y)


def main():
    torch.manual_seed(0)
    train_loader = DataLoader(make_split(90 * 32, 0), batch_size=32, shuffle=True)
    val_loader = DataLoader(make_split(256, 1), batch_size=64)
    Trainer(TabularNet(), train_loader, val_loader).fit(epochs=3)


if __name__ == "__main__":
    main()
