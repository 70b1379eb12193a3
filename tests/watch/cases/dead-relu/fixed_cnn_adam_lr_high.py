"""A small CNN trained by train_one_epoch(model, optimizer, loader); the fix: Adam at its usual
lr=1e-3, so the conv channels stay alive."""
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
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        loss = train_one_epoch(model, optimizer, loader, nn.CrossEntropyLoss())
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
