"""A small CNN trained by train_one_epoch(model, optimizer, loader) with Adam at lr=0.05 (a value
meant for SGD): every weight moves by about 0.05 per step, the first steps push most conv
channels negative for every input, and their ReLUs output 0 from then on (dead ReLUs)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train_one_epoch(model, optimizer, loader, loss_fn):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 3, 12, 12, generator=g)
    y = (x[:, 0, :6].mean((1, 2)) > x[:, 1, 6:].mean((1, 2))).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(32, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for epoch in range(2):
        loss = train_one_epoch(model, optimizer, loader, nn.CrossEntropyLoss())
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
