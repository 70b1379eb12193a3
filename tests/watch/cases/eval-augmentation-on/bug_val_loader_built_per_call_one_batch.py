"""A sensor-window classifier whose Trainer builds its validation DataLoader inside validate() on
every call, over a validation split small enough for one batch. Both splits are Subsets of one
WindowDataset that applies random jitter and a random time shift to every window it returns, so
the validation windows are freshly jittered and shifted at each evaluation: the reported accuracy
moves with the augmentation draw, not only with the model."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset

LENGTH, CHANNELS, CLASSES = 64, 3, 4


class RandomShift:
    def __init__(self, max_shift):
        self.max_shift = max_shift

    def __call__(self, x):
        return torch.roll(x, int(torch.randint(-self.max_shift, self.max_shift + 1, (1,))), dims=-1)


class RandomJitter:
    def __init__(self, sigma):
        self.sigma = sigma

    def __call__(self, x):
        return x + self.sigma * torch.randn_like(x)


class WindowDataset(Dataset):
    def __init__(self, n, seed, augment):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, CLASSES, (n,), generator=g)
        t = torch.arange(LENGTH).float()
        freq = (1 + self.labels).float()[:, None, None]
        phase = torch.rand(n, CHANNELS, 1, generator=g) * 6.28
        self.windows = torch.sin(freq * t * 0.1 + phase) + 0.3 * torch.randn(n, CHANNELS, LENGTH, generator=g)
        self.augment = augment

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = self.windows[i]
        for aug in self.augment:
            x = aug(x)
        return x, self.labels[i]


class Trainer:
    def __init__(self, model, train_set, val_set, batch_size=32):
        self.model, self.train_set, self.val_set, self.batch_size = model, train_set, val_set, batch_size
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def validate(self):
        loader = DataLoader(self.val_set, batch_size=128)
        self.model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in loader:
                correct += (self.model(x).argmax(1) == y).sum().item()
        self.model.train()
        return correct / len(self.val_set)

    def fit(self, epochs):
        loader = DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(0))
        for epoch in range(epochs):
            for x, y in loader:
                loss = F.cross_entropy(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            print(f"epoch {epoch} loss {loss.item():.3f} val acc {self.validate():.3f}")


def main():
    torch.manual_seed(0)
    data = WindowDataset(740, seed=0, augment=[RandomShift(6), RandomJitter(0.2)])
    order = torch.randperm(740, generator=torch.Generator().manual_seed(1)).tolist()
    train_set, val_set = Subset(data, order[:640]), Subset(data, order[640:])
    model = nn.Sequential(nn.Conv1d(CHANNELS, 16, 9, padding=4), nn.ReLU(), nn.AdaptiveMaxPool1d(8),
                          nn.Flatten(), nn.Linear(128, CLASSES))
    Trainer(model, train_set, val_set).fit(epochs=3)


if __name__ == "__main__":
    main()
