"""Gradient accumulation over 4 batches in a train_epoch(model, optimizer, scheduler, loader)
helper: the optimizer steps once per window, but scheduler.step() sits after every batch, so a
OneCycle-style warmup/decay sized in optimizer steps runs four times too fast."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ACCUMULATE = 4


def train_epoch(model, optimizer, scheduler, loader):
    model.train()
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x), y) / ACCUMULATE
        loss.backward()
        if (i + 1) % ACCUMULATE == 0:
            optimizer.step()
            optimizer.zero_grad()
        scheduler.step()
    return loss.item() * ACCUMULATE


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 16, generator=g)
    y = (x[:, :4] * 2).argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    epochs = 3
    total_updates = epochs * len(loader) // ACCUMULATE
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 20) * max(0.0, 1 - s / total_updates))
    for epoch in range(epochs):
        print(f"epoch {epoch} loss {train_epoch(model, optimizer, scheduler, loader):.3f}")


if __name__ == "__main__":
    main()
