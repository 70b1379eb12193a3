"""A course's time-series forecasting training script: sliding windows over a synthetic noisy
series feed a small sequence model (input projection, GRU encoder, linear head with pred_len
outputs), trained with Adam and MSELoss by a train_epoch(model, loader, optimizer, criterion)
helper and checked by a validate(...) helper each epoch. With pred_len = 1 the head returns
(B, 1) while the dataset yields one target per window, shape (B,), and the criterion is called on
the pair as is: MSELoss broadcasts them to (B, B), comparing each prediction with every target in
the batch, so the model is pulled toward the batch mean and the validation loss that drives model
selection is not the per-sample MSE.

Thread: https://github.com/jsboige/CoursIA/pull/926
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class WindowDataset(Dataset):
    def __init__(self, series, lookback, pred_len):
        self.series, self.lookback, self.pred_len = series, lookback, pred_len

    def __len__(self):
        return len(self.series) - self.lookback - self.pred_len + 1

    def __getitem__(self, i):
        x = self.series[i:i + self.lookback].unsqueeze(-1)
        y = self.series[i + self.lookback:i + self.lookback + self.pred_len]
        return x, y.squeeze(-1) if self.pred_len == 1 else y


class SeqForecaster(nn.Module):
    def __init__(self, d_model, pred_len):
        super().__init__()
        self.proj = nn.Linear(1, d_model)
        self.encoder = nn.GRU(d_model, d_model, batch_first=True)
        self.head = nn.Linear(d_model, pred_len)

    def forward(self, x):
        h, _ = self.encoder(torch.tanh(self.proj(x)))
        return self.head(h[:, -1])


def make_series(n, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(n, dtype=torch.float32)
    return torch.sin(t / 6.0) + 0.5 * torch.sin(t / 17.0) + 0.2 * torch.randn(n, generator=g)


def train_epoch(model, loader, optimizer, criterion):
    model.train()
    total = 0.0
    for x_batch, y_batch in loader:
        optimizer.zero_grad()
        pred = model(x_batch)
        loss = criterion(pred, y_batch)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(x_batch)
    return total / len(loader.dataset)


def validate(model, loader, criterion):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x_batch, y_batch in loader:
            total += criterion(model(x_batch), y_batch).item() * len(x_batch)
    return total / len(loader.dataset)


def main():
    torch.manual_seed(0)
    lookback, pred_len = 24, 1
    series = make_series(1400, seed=1)
    train_ds = WindowDataset(series[:1100], lookback, pred_len)
    val_ds = WindowDataset(series[1100:], lookback, pred_len)
    train_dl = DataLoader(train_ds, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0))
    val_dl = DataLoader(val_ds, batch_size=64)

    model = SeqForecaster(d_model=32, pred_len=pred_len)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    criterion = nn.MSELoss()

    best = float("inf")
    for epoch in range(5):
        tr = train_epoch(model, train_dl, optimizer, criterion)
        va = validate(model, val_dl, criterion)
        best = min(best, va)
        print(f"epoch {epoch}  train_mse {tr:.4f}  val_mse {va:.4f}  best {best:.4f}")


if __name__ == "__main__":
    main()
