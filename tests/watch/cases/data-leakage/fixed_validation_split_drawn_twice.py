"""A classifier trained through a Trainer class with fit() and validate() methods. The data module
draws its split once, in its constructor, and setup("fit") / setup("validate") hand out the two
parts of that one random_split, so no validation row is a training row."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split


class DataModule:
    def __init__(self, n=1200, features=24, classes=4):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, features, generator=g)
        w = torch.randn(features, classes, generator=g)
        self.y = (self.x @ w + 2.0 * torch.randn(n, classes, generator=g)).argmax(1)   # noisy labels: memorisable
        self.full = TensorDataset(self.x, self.y)
        # fixed: one draw, both parts kept
        self.parts = random_split(self.full, [0.8, 0.2], generator=torch.Generator().manual_seed(1))

    def setup(self, stage):
        if stage == "fit":
            self.train_ds = self.parts[0]
        else:
            self.val_ds = self.parts[1]

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=32, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=64)


class Trainer:
    def __init__(self, model, lr=3e-3):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def validate(self, loader):
        self.model.eval()
        correct = total = 0
        with torch.no_grad():
            for x, y in loader:
                correct += (self.model(x).argmax(1) == y).sum().item()
                total += len(y)
        self.model.train()
        return correct / total

    def fit(self, dm, epochs):
        dm.setup("fit")
        dm.setup("validate")
        train_loader, val_loader = dm.train_dataloader(), dm.val_dataloader()
        for epoch in range(epochs):
            for x, y in train_loader:
                loss = F.cross_entropy(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            print(f"epoch {epoch} loss {loss.item():.4f} val acc {self.validate(val_loader):.3f}")


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(24, 128), nn.ReLU(), nn.Linear(128, 4))
    Trainer(model).fit(DataModule(), epochs=3)


if __name__ == "__main__":
    main()
