"""A 1-D CNN on sensor windows in a Lightning-style module run by a small loop. make_loaders(cfg)
builds both datasets through one helper and passes `augment=cfg.augment` to the validation
dataset as well, so its windows get the random gain, jitter noise and time shift (NumPy's global
random state) on every read: each validation pass scores other random windows."""
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

WINDOW, CHANNELS, CLASSES = 64, 3, 5


def synthetic_recordings(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, n)
    t = np.arange(WINDOW) / WINDOW
    freqs = 1.0 + labels[:, None, None] * 1.5 + 0.2 * np.arange(CHANNELS)[None, :, None]
    signals = np.sin(2 * np.pi * freqs * t[None, None, :]) + 0.3 * rng.standard_normal((n, CHANNELS, WINDOW))
    return signals.astype(np.float32), labels


class SensorWindows(Dataset):
    def __init__(self, signals, labels, augment=False):
        self.signals, self.labels, self.augment = signals, labels, augment

    def __len__(self):
        return len(self.labels)

    def _augment(self, x):
        x = x * np.random.uniform(0.8, 1.2)
        x = x + np.random.normal(0.0, 0.05, size=x.shape).astype(np.float32)
        return np.roll(x, np.random.randint(-8, 9), axis=-1)

    def __getitem__(self, index):
        x = self.signals[index]
        if self.augment:
            x = self._augment(x)
        return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)), int(self.labels[index])


def make_loaders(cfg):
    def loader(split, seed, n, shuffle):
        signals, labels = synthetic_recordings(n, seed)
        return DataLoader(SensorWindows(signals, labels, augment=cfg.augment), batch_size=cfg.batch_size,
                          shuffle=shuffle)
    return loader("train", 0, 960, True), loader("val", 1, 192, False)


class WindowClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(CHANNELS, 16, 5, padding=2), nn.ReLU(), nn.Conv1d(16, 32, 5, padding=2),
                                 nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, CLASSES))

    def forward(self, x):
        return self.net(x)


class LitWindows:
    def __init__(self, cfg):
        self.model, self.cfg = WindowClassifier(), cfg

    def configure_optimizers(self):
        return torch.optim.Adam(self.model.parameters(), lr=self.cfg.lr)

    def training_step(self, batch):
        x, y = batch
        return F.cross_entropy(self.model(x), y)

    def validation_step(self, batch):
        x, y = batch
        logits = self.model(x)
        return F.cross_entropy(logits, y).item(), (logits.argmax(1) == y).float().mean().item()


def fit(module, train_loader, val_loader, epochs):
    optimizer = module.configure_optimizers()
    for epoch in range(epochs):
        module.model.train()
        for batch in train_loader:
            optimizer.zero_grad()
            module.training_step(batch).backward()
            optimizer.step()
        module.model.eval()
        with torch.no_grad():
            scores = [module.validation_step(batch) for batch in val_loader]
        print(f"epoch {epoch}: val loss {np.mean([s[0] for s in scores]):.3f} acc {np.mean([s[1] for s in scores]):.3f}")


def main():
    torch.manual_seed(0)
    np.random.seed(0)
    cfg = SimpleNamespace(augment=True, batch_size=32, lr=3e-3, epochs=3)
    train_loader, val_loader = make_loaders(cfg)
    fit(LitWindows(cfg), train_loader, val_loader, cfg.epochs)


if __name__ == "__main__":
    main()
