"""Healthy look-alike of data-leakage: a sales table ordered by date, split by time into training,
validation and test periods. The numeric columns are min-max scaled with the training period's
extremes only; the store type is one-hot encoded over all the categories the business defines and
its size class (0 to 3) is divided by 3, and the largest store type opens only in the test period:
its indicator column is all zero in training, and the size column's training values stop at 2/3
where the later periods reach 1. Those ranges are fixed by the encodings, not fitted on any split:
the later periods scaled nothing in the training rows."""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

STORE_TYPES = ("mall", "street", "outlet", "airport")


def load_sales(rows=2400, seed=3):
    rng = np.random.default_rng(seed)
    day = np.arange(rows)
    footfall = 300 + 0.2 * day + rng.normal(0, 20, rows)
    promo = rng.uniform(0, 30, rows)
    store = rng.integers(0, 3, rows)
    store[int(0.85 * rows):][rng.random(rows - int(0.85 * rows)) < 0.3] = 3    # the airport store opens late
    onehot = np.eye(len(STORE_TYPES))[store]
    sales = 0.05 * footfall + 0.3 * promo + 4 * onehot[:, 0] + rng.normal(0, 1, rows)
    size_class = (store / 3.0)[:, None]
    return np.column_stack([footfall, promo]).astype(np.float32), \
        np.concatenate([onehot, size_class], 1).astype(np.float32), sales.astype(np.float32)[:, None]


def loaders(numeric, onehot, target, n_train, n_val):
    lo, hi = numeric[:n_train].min(0), numeric[:n_train].max(0)
    x = np.concatenate([(numeric - lo) / (hi - lo), onehot], 1)
    bounds = [(0, n_train), (n_train, n_train + n_val), (n_train + n_val, len(x))]
    sets = [TensorDataset(torch.from_numpy(x[a:b]), torch.from_numpy(target[a:b])) for a, b in bounds]
    return (DataLoader(sets[0], batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0)),
            DataLoader(sets[1], batch_size=256), DataLoader(sets[2], batch_size=256))


def main():
    torch.manual_seed(0)
    numeric, onehot, target = load_sales()
    n = len(target)
    train_loader, val_loader, test_loader = loaders(numeric, onehot, target, int(0.7 * n), int(0.15 * n))
    model = nn.Sequential(nn.Linear(7, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(3):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            nn.functional.l1_loss(model(xb), yb).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            print(epoch, np.mean([nn.functional.l1_loss(model(xb), yb).item() for xb, yb in val_loader]))


if __name__ == "__main__":
    main()
