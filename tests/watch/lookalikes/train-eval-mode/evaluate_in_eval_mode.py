"""Healthy look-alike of train-eval-mode: a model with Dropout and BatchNorm evaluated every few
batches by an evaluate() helper that calls model.eval() and runs under torch.no_grad(), and
model.train() again before training resumes."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    model.train()
    return correct / total


def train(model, optimizer, train_loader, val_loader, epochs):
    model.train()
    for epoch in range(epochs):
        for i, (x, y) in enumerate(train_loader):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            if i % 5 == 4:
                accuracy = evaluate(model, val_loader)
    return accuracy


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 12, generator=g)
    y = (x[:, :3].sum(1) > 0).long()
    train_loader = DataLoader(TensorDataset(x[:512], y[:512]), batch_size=32, shuffle=True, generator=g)
    val_loader = DataLoader(TensorDataset(x[512:], y[512:]), batch_size=64)
    model = nn.Sequential(nn.Linear(12, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    print(f"accuracy {train(model, optimizer, train_loader, val_loader, epochs=4):.2f}")


if __name__ == "__main__":
    main()
