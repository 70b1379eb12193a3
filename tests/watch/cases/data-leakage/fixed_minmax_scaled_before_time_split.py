"""Tabular demand regression on a table ordered by date: the notebook-style script min-max scales
every feature column with the training period's extremes (a MinMaxScaler fitted on X_train), wraps it in
one TensorDataset, then splits it by time into Subsets (the first 70 percent for training, the next
15 for validation, the last 15 for test) and trains an MLP with Adam and MSELoss through a fit()
helper that validates each epoch. The minima and maxima come from the training rows only, and the
same scaling is applied to every row: features that keep growing over time (customers, floor area,
price index) go past 1 in the validation and test periods, as they will in production."""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Subset, TensorDataset


def load_table(rows=3000, seed=1):
    rng = np.random.default_rng(seed)
    day = np.arange(rows)
    temperature = 12 + 9 * np.sin(2 * np.pi * day / 365) + rng.normal(0, 2, rows)
    customers = 800 + 0.6 * day + rng.normal(0, 40, rows)
    area = 50 + 0.01 * day + rng.normal(0, 1, rows)
    price = 100 * 1.0002 ** day + rng.normal(0, 1, rows)
    holiday = (rng.random(rows) < 0.05).astype(float)
    X = np.stack([temperature, customers, area, price, holiday], 1).astype(np.float32)
    y = (0.02 * customers - 0.5 * temperature + 3 * holiday + rng.normal(0, 1, rows)).astype(np.float32)
    return X, y[:, None]


def min_max_scale(X, fit_rows):
    lo, hi = fit_rows.min(axis=0), fit_rows.max(axis=0)
    return (X - lo) / (hi - lo)


def fit(model, train_loader, val_loader, epochs, lr=1e-3):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.MSELoss()
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val = np.mean([loss_fn(model(xb), yb).item() for xb, yb in val_loader])
        print(f"epoch {epoch}: val mse {val:.3f}")


def main():
    torch.manual_seed(0)
    X, y = load_table()
    n = len(X)
    n_train, n_val = int(0.7 * n), int(0.15 * n)
    X = min_max_scale(X, X[:n_train])
    table = TensorDataset(torch.from_numpy(X), torch.from_numpy(y))
    train_set = Subset(table, range(0, n_train))
    val_set = Subset(table, range(n_train, n_train + n_val))
    test_set = Subset(table, range(n_train + n_val, n))
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(val_set, batch_size=256)
    test_loader = DataLoader(test_set, batch_size=256)
    model = nn.Sequential(nn.Linear(5, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    fit(model, train_loader, val_loader, epochs=3)
    model.eval()
    with torch.no_grad():
        print("test mse", np.mean([nn.functional.mse_loss(model(xb), yb).item() for xb, yb in test_loader]))


if __name__ == "__main__":
    main()
