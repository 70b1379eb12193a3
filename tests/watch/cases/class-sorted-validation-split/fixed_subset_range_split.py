"""A Trainer class with train_epoch() and validate() over a dataset read folder by folder, so the
samples are sorted by class. The fix splits with random_split and a seeded generator, so both
sides hold every class."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split

CLASSES, PER_CLASS = 5, 80


def read_folders(seed=0):
    g = torch.Generator().manual_seed(seed)
    centers = 2 * torch.randn(CLASSES, 12, generator=g)
    x = torch.cat([centers[c] + torch.randn(PER_CLASS, 12, generator=g) for c in range(CLASSES)])
    y = torch.arange(CLASSES).repeat_interleave(PER_CLASS)
    return TensorDataset(x, y)


def split(dataset, train_fraction=0.8):
    n_train = int(len(dataset) * train_fraction)
    return random_split(dataset, [n_train, len(dataset) - n_train], generator=torch.Generator().manual_seed(0))


class Trainer:
    def __init__(self, model, train_set, val_set):
        self.model = model
        self.train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
        self.val_loader = DataLoader(val_set, batch_size=100)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        self.criterion = nn.CrossEntropyLoss()

    def train_epoch(self):
        self.model.train()
        for x, y in self.train_loader:
            self.optimizer.zero_grad()
            self.criterion(self.model(x), y).backward()
            self.optimizer.step()

    def validate(self):
        self.model.eval()
        total, correct, count = 0.0, 0, 0
        with torch.no_grad():
            for x, y in self.val_loader:
                logits = self.model(x)
                total += self.criterion(logits, y).item() * len(y)
                correct += (logits.argmax(1) == y).sum().item()
                count += len(y)
        return total / count, correct / count


def main():
    torch.manual_seed(0)
    train_set, val_set = split(read_folders())
    trainer = Trainer(nn.Sequential(nn.Linear(12, 48), nn.ReLU(), nn.Linear(48, CLASSES)), train_set, val_set)
    for epoch in range(5):
        trainer.train_epoch()
        val_loss, val_acc = trainer.validate()
    print(f"val loss {val_loss:.2f} accuracy {val_acc:.2f}")


if __name__ == "__main__":
    main()
