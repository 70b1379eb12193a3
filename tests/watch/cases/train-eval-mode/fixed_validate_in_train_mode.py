"""Validation switches the model to eval mode under torch.no_grad(), and each training epoch
switches it back to training mode."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(12, 48), nn.BatchNorm1d(48), nn.ReLU(), nn.Dropout(0.3))
        self.out = nn.Linear(48, 3)

    def forward(self, x):
        return self.out(self.features(x))


class Trainer:
    def __init__(self, model, train_loader, val_loader):
        self.model, self.train_loader, self.val_loader = model, train_loader, val_loader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        self.criterion = nn.CrossEntropyLoss()

    def validate(self):
        correct = 0
        self.model.eval()
        with torch.no_grad():
            for x, y in self.val_loader:
                correct += (self.model(x).argmax(1) == y).sum().item()
        return correct / len(self.val_loader.dataset)

    def train_epoch(self):
        self.model.train()
        for x, y in self.train_loader:
            self.optimizer.zero_grad()
            self.criterion(self.model(x), y).backward()
            self.optimizer.step()

    def fit(self, epochs):
        for _ in range(epochs):
            self.train_epoch()
            accuracy = self.validate()
        return accuracy


def data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long())


def main():
    torch.manual_seed(0)
    trainer = Trainer(Net(), DataLoader(data(320, 0), batch_size=32, shuffle=True),
                      DataLoader(data(128, 1), batch_size=32))
    print(f"val accuracy {trainer.fit(epochs=5):.2f}")


if __name__ == "__main__":
    main()
