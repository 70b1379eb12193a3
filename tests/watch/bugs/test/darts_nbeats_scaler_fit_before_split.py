"""A darts-style N-BEATS forecasting walk-through on a daily price series: the missing days are
filled, a MinMax Scaler is fitted with fit_transform() on the whole series, and only then is the
scaled series split at a date into a training part and a validation part. A small
TorchForecastingModel-like wrapper cuts (input_chunk, output_chunk) windows, fits an N-BEATS
network (stacks of fully connected blocks with backcast / forecast residual links) with Adam and
MSELoss, evaluates on the validation part each epoch and reports a MAPE in price units. Because
the scaler saw the minimum and maximum of the validation period, the training inputs are scaled
with statistics of data that is supposed to be unseen, and the validation numbers are measured on
a split whose scale leaked into training.

Thread: https://github.com/unit8co/darts/issues/573
"""
import torch
from torch import nn


class Scaler:
    def fit(self, values):
        self.lo, self.hi = values.min(), values.max()
        return self

    def transform(self, values):
        return (values - self.lo) / (self.hi - self.lo)

    def inverse_transform(self, values):
        return values * (self.hi - self.lo) + self.lo

    def fit_transform(self, values):
        return self.fit(values).transform(values)


class NBeatsBlock(nn.Module):
    def __init__(self, input_chunk, output_chunk, width):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(input_chunk, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.backcast = nn.Linear(width, input_chunk)
        self.forecast = nn.Linear(width, output_chunk)

    def forward(self, x):
        h = self.fc(x)
        return self.backcast(h), self.forecast(h)


class NBeatsNet(nn.Module):
    def __init__(self, input_chunk, output_chunk, num_blocks=3, width=64):
        super().__init__()
        self.blocks = nn.ModuleList([NBeatsBlock(input_chunk, output_chunk, width) for _ in range(num_blocks)])

    def forward(self, x):
        residual, forecast = x, 0.0
        for block in self.blocks:
            back, fore = block(residual)
            residual = residual - back
            forecast = forecast + fore
        return forecast


class NBEATSModel:
    def __init__(self, input_chunk_length, output_chunk_length, batch_size=32, lr=1e-3, random_state=42):
        torch.manual_seed(random_state)
        self.inp, self.out, self.batch_size = input_chunk_length, output_chunk_length, batch_size
        self.net = NBeatsNet(input_chunk_length, output_chunk_length)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=lr)
        self.criterion = nn.MSELoss()

    def _windows(self, series):
        n = len(series) - self.inp - self.out + 1
        x = torch.stack([series[i:i + self.inp] for i in range(n)])
        y = torch.stack([series[i + self.inp:i + self.inp + self.out] for i in range(n)])
        return x, y

    def fit(self, series, val_series, epochs):
        x, y = self._windows(series)
        # validation windows take their input chunk from the end of the training part
        vx, vy = self._windows(torch.cat([series[-self.inp:], val_series]))
        g = torch.Generator().manual_seed(0)
        for epoch in range(epochs):
            self.net.train()
            perm = torch.randperm(len(x), generator=g)
            for i in range(0, len(x), self.batch_size):
                idx = perm[i:i + self.batch_size]
                self.optimizer.zero_grad()
                loss = self.criterion(self.net(x[idx]), y[idx])
                loss.backward()
                self.optimizer.step()
            self.net.eval()
            with torch.no_grad():
                val_loss = self.criterion(self.net(vx), vy).item()
            print(f"epoch {epoch}  train_loss {loss.item():.5f}  val_loss {val_loss:.5f}")
        return vx, vy


def load_prices(n_days, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(n_days, dtype=torch.float32)
    drift = 40.0 + 0.12 * t + 6.0 * torch.sin(t / 20.0)
    prices = drift + torch.cumsum(0.8 * torch.randn(n_days, generator=g), 0)
    prices[torch.randint(0, n_days, (25,), generator=g)] = float("nan")     # missing days
    return prices


def fill_missing(values):
    out = values.clone()
    for i in range(len(out)):
        if torch.isnan(out[i]):
            out[i] = out[i - 1]
    return out


def main():
    prices = fill_missing(load_prices(900, seed=3))
    scaler = Scaler()
    series_scaled = scaler.fit_transform(prices)             # fitted on the full series
    split = 720                                              # the "split after date" point
    train, val = series_scaled[:split], series_scaled[split:]

    model = NBEATSModel(input_chunk_length=30, output_chunk_length=7)
    vx, vy = model.fit(train, val_series=val, epochs=4)
    with torch.no_grad():
        pred = scaler.inverse_transform(model.net(vx))
    actual = scaler.inverse_transform(vy)
    mape = ((pred - actual).abs() / actual.abs()).mean().item() * 100
    print(f"validation MAPE {mape:.2f}%")


if __name__ == "__main__":
    main()
