"""The same churn classifier with one scaling for both splits: the validation split is standardized
with the training split's statistics, as the training split is."""
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_customers(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.stack([torch.rand(n, generator=g) * 72, torch.rand(n, generator=g) * 120 + 20,
                     torch.randint(0, 10, (n,), generator=g).float(), torch.rand(n, generator=g) * 5], 1)
    logit = -0.05 * x[:, 0] + 0.02 * x[:, 1] + 0.4 * x[:, 2] - 0.5 * x[:, 3]
    return x, (logit + 0.5 * torch.randn(n, generator=g) > 0).long()


def scale(features, kind, reference):
    if kind == "standard":
        return (features - reference.mean(0)) / reference.std(0)
    low, high = reference.min(0).values, reference.max(0).values
    return (features - low) / (high - low)


def build_loaders(cfg):
    x_train, y_train = make_customers(1200, 0)
    x_val, y_val = make_customers(300, 1)
    train = TensorDataset(scale(x_train, cfg.train_scaling, x_train), y_train)
    val = TensorDataset(scale(x_val, cfg.val_scaling, x_train), y_val)
    return DataLoader(train, batch_size=64, shuffle=True), DataLoader(val, batch_size=100)


def fit(model, train_loader, val_loader, epochs):
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            accuracy = sum((model(x).argmax(1) == y).sum().item() for x, y in val_loader) / len(val_loader.dataset)
        print(f"epoch {epoch}: val accuracy {accuracy:.3f}")


def main():
    torch.manual_seed(0)
    cfg = SimpleNamespace(train_scaling="standard", val_scaling="standard", epochs=4)
    model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
    fit(model, *build_loaders(cfg), cfg.epochs)


if __name__ == "__main__":
    main()
