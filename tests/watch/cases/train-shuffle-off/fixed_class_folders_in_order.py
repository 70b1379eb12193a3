"""A Trainer class with train_epoch() and evaluate() over a dataset built folder by folder, one
class after another (as an image-folder reader returns it). The fix shuffles the training
DataLoader, so every batch mixes the classes; validation stays in order."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES, PER_CLASS = 8, 64


def read_class_folders(seed):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(CLASSES, 16, generator=g) * 1.5
    xs, ys = [], []
    for c in range(CLASSES):  # folder by folder
        xs.append(centers[c] + torch.randn(PER_CLASS, 16, generator=g))
        ys.append(torch.full((PER_CLASS,), c))
    return TensorDataset(torch.cat(xs), torch.cat(ys))


class Trainer:
    def __init__(self, model, train_loader, val_loader):
        self.model, self.train_loader, self.val_loader = model, train_loader, val_loader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        self.criterion = nn.CrossEntropyLoss()

    def train_epoch(self):
        self.model.train()
        for x, y in self.train_loader:
            self.optimizer.zero_grad()
            self.criterion(self.model(x), y).backward()
            self.optimizer.step()

    def evaluate(self):
        self.model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in self.val_loader:
                correct += (self.model(x).argmax(1) == y).sum().item()
        return correct / len(self.val_loader.dataset)


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    trainer = Trainer(model, DataLoader(read_class_folders(0), batch_size=32, shuffle=True),
                      DataLoader(read_class_folders(1), batch_size=64))
    for epoch in range(4):
        trainer.train_epoch()
        accuracy = trainer.evaluate()
    print(f"val accuracy {accuracy:.2f}")


if __name__ == "__main__":
    main()
