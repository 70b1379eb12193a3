"""A multi-label tagger trained with gradient accumulation (4 micro-batches per step): the
model's head ends in the last Linear layer, and nn.BCEWithLogitsLoss applies the sigmoid."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ACCUMULATE = 4


def build_tagger(features=24, tags=6):
    return nn.Sequential(nn.Linear(features, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, tags))


def train(model, optimizer, criterion, loader, epochs):
    model.train()
    for epoch in range(epochs):
        optimizer.zero_grad()
        for i, (x, tags) in enumerate(loader):
            loss = criterion(model(x), tags) / ACCUMULATE
            loss.backward()
            if (i + 1) % ACCUMULATE == 0:
                optimizer.step()
                optimizer.zero_grad()
    return loss.item() * ACCUMULATE


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 24, generator=g)
    tags = (x[:, :6] + 0.5 * x[:, 6:12] > 0.3).float()
    loader = DataLoader(TensorDataset(x, tags), batch_size=16, shuffle=True, generator=g)
    model = build_tagger()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    print(f"loss {train(model, optimizer, nn.BCEWithLogitsLoss(), loader, epochs=4):.3f}")


if __name__ == "__main__":
    main()
