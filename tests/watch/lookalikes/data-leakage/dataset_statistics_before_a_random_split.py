"""Healthy look-alike of data-leakage: sensor readings of independent devices are standardized
with the mean and standard deviation of the whole table, then split at random (random_split) into
training, validation and test rows. The rows are exchangeable, so the training split's own
statistics are those of the whole table within sampling error: nothing of the held-out rows'
level or spread is passed to training that the training rows do not already carry (a scaler fitted
on all rows of a time-ordered table, where the later periods move the statistics, is the fault)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split


def load_readings(n=4000, g=None):
    x = torch.randn(n, 12, generator=g) * torch.linspace(0.5, 30, 12) + torch.linspace(-20, 500, 12)
    y = (x[:, :4] - x[:, :4].mean(0)).div(x[:, :4].std(0)).sum(1, keepdim=True) + 0.1 * torch.randn(n, 1, generator=g)
    return x, y


def main():
    g = torch.Generator().manual_seed(0)
    x, y = load_readings(g=g)
    x = (x - x.mean(0)) / x.std(0)
    train, val, test = random_split(TensorDataset(x, y), [0.7, 0.15, 0.15], generator=g)
    train_loader = DataLoader(train, batch_size=64, shuffle=True, generator=g)
    val_loader, test_loader = DataLoader(val, batch_size=256), DataLoader(test, batch_size=256)
    model = nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    for epoch in range(3):
        model.train()
        for xb, yb in train_loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val_loss = sum(nn.functional.mse_loss(model(xb), yb, reduction="sum").item() for xb, yb in val_loader)
        print(f"epoch {epoch}: val mse {val_loss / len(val):.4f}")
    with torch.no_grad():
        print("test mse", sum(nn.functional.mse_loss(model(xb), yb, reduction="sum").item()
                              for xb, yb in test_loader) / len(test))


if __name__ == "__main__":
    main()
