"""A patch classifier whose dataset builds its own NumPy generator in __init__ (`self.rng =
np.random.default_rng(seed)`) and draws each random crop and flip from it. The DataLoader runs two
workers; each starts with a copy of the dataset, its generator in the same state, so the two
workers draw the same crops and flips in the same order: the augmentation is half as
varied as it looks, and repeats every epoch when the workers start again."""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class PatchDataset(Dataset):
    def __init__(self, n, seed=0, size=16, crop=12):
        rng = np.random.default_rng(seed)
        self.labels = rng.integers(0, 3, n)
        base = rng.random((3, size, size)).astype(np.float32)
        self.images = np.stack([np.roll(base, int(k) * 4, axis=1) for k in self.labels])
        self.images += 0.2 * rng.standard_normal(self.images.shape).astype(np.float32)
        self.crop, self.size = crop, size
        self.rng = np.random.default_rng(seed + 1)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        i, j = self.rng.integers(0, self.size - self.crop + 1, 2)
        patch = self.images[index][:, i:i + self.crop, j:j + self.crop]
        if self.rng.random() < 0.5:
            patch = patch[:, :, ::-1]
        return torch.from_numpy(patch.copy()), int(self.labels[index])


def train(model, loader, optimizer, epochs):
    for epoch in range(epochs):
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


def main():
    torch.manual_seed(0)
    loader = DataLoader(PatchDataset(512), batch_size=32, shuffle=True, num_workers=2)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(16, 3))
    train(model, loader, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), epochs=4)


if __name__ == "__main__":
    main()
