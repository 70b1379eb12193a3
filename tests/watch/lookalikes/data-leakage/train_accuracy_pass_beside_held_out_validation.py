"""Healthy look-alike of data-leakage: after every epoch the script measures accuracy on the training
loader (under no_grad, to watch the generalisation gap) and on a held-out validation loader drawn by
the same single random_split. The training pass reads training rows by design; the validation pass
shares none with training."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split


def accuracy(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    model.train()
    return correct / total


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1000, 20, generator=g)
    y = (x[:, :3].sum(1) > 0).long() + (x[:, 3] > 1).long()
    train_ds, val_ds = random_split(TensorDataset(x, y), [800, 200], generator=g)
    train_loader = DataLoader(train_ds, batch_size=32, shuffle=True)
    train_eval_loader = DataLoader(train_ds, batch_size=100)
    val_loader = DataLoader(val_ds, batch_size=100)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(3):
        for xb, yb in train_loader:
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} train acc {accuracy(model, train_eval_loader):.3f} "
              f"val acc {accuracy(model, val_loader):.3f}")


if __name__ == "__main__":
    main()
