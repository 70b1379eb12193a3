"""A Lightning-style data module whose setup() reads the image table, takes the label column, and
only then shuffles the table to split it; the dataset pairs the shuffled images with the unshuffled
labels, so inputs and labels no longer belong together. A tiny hand-written loop calls
training_step/configure_optimizers.

Thread: https://github.com/Borda/kaggle_image-classify/pull/12
"""
import random

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class LeafDataset(Dataset):
    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


class LeafDataModule:
    def __init__(self, table, batch_size=32, split=0.8):
        self.table, self.batch_size, self.split = table, batch_size, split

    def setup(self):
        labels = [row["label"] for row in self.table]
        random.Random(42).shuffle(self.table)
        images = torch.stack([row["image"] for row in self.table])
        labels = torch.tensor(labels)
        n = int(len(images) * self.split)
        self.train_dataset = LeafDataset(images[:n], labels[:n])
        self.val_dataset = LeafDataset(images[n:], labels[n:])

    def train_dataloader(self):
        return DataLoader(self.train_dataset, batch_size=self.batch_size, shuffle=True,
                          generator=torch.Generator().manual_seed(0))

    def val_dataloader(self):
        return DataLoader(self.val_dataset, batch_size=128)


class LitLeaf(nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                                 nn.Flatten(), nn.Linear(128, num_classes))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        return (self(x).argmax(1) == y).float().mean()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=3e-3)


def fit(model, dm, max_epochs):
    dm.setup()
    optimizer = model.configure_optimizers()
    for epoch in range(max_epochs):
        model.train()
        for i, batch in enumerate(dm.train_dataloader()):
            loss = model.training_step(batch, i)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            acc = torch.stack([model.validation_step(b, i) for i, b in enumerate(dm.val_dataloader())])
        print(f"epoch {epoch} train loss {loss.item():.3f} val acc {acc.mean().item():.3f}")


def leaf_table(n=800, seed=0):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(5, 3, 16, 16, generator=g)
    labels = torch.randint(0, 5, (n,), generator=g)
    return [{"image": protos[c] + 0.8 * torch.randn(3, 16, 16, generator=g), "label": int(c)}
            for c in labels]


def main():
    torch.manual_seed(0)
    fit(LitLeaf(), LeafDataModule(leaf_table()), max_epochs=3)


if __name__ == "__main__":
    main()
