"""Gradient accumulation (4 micro-batches per step, counted within the epoch) with
optimizer.zero_grad() at the top of every epoch: with 66 batches an epoch the 2 leftover
micro-batches of each epoch are dropped, 3% of the backward() calls, a common and harmless
choice (the next epoch starts a clean window). Not a bug worth a finding."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ACCUMULATION = 4


def train(model, optimizer, loader, epochs):
    for epoch in range(epochs):
        model.train()
        optimizer.zero_grad()
        for i, (x, y) in enumerate(loader):
            loss = F.cross_entropy(model(x), y) / ACCUMULATION
            loss.backward()
            if (i + 1) % ACCUMULATION == 0:
                optimizer.step()
                optimizer.zero_grad()
        print(f"epoch {epoch} loss {loss.item() * ACCUMULATION:.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(20, 5, generator=g)
    x = torch.randn(66 * 8, 20, generator=g)
    y = (x @ w).argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))
    train(model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), loader, epochs=4)


if __name__ == "__main__":
    main()
