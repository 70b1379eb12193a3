"""A windows-based forecaster in the NeuralForecast BaseWindows layout: a LightningModule-style
class samples (input_size + h) windows from a panel of series; _normalization() standardises each
window with the mean and std of its own input part (scaler_type='standard'), _parse_windows() splits
the window into insample_y / outsample_y, and an MLP maps the input_size lags to the h-step
forecast. training_step() computes the MAE loss on the normalised scale; validation_step() rebuilds
the validation windows, keeps a copy of the raw outsample target (original_outsample_y), normalises,
runs the model and calls _compute_valid_loss(), and the fit loop uses the validation loss every
val_check_steps for early stopping (early_stop_patience_steps) and keeps the best-scoring weights.
For point losses _compute_valid_loss() never maps the output back with _inv_normalization(), so the
validation MAE compares forecasts in standardised units with targets in the series' own units
(levels in the hundreds). That number is dominated by the series level, barely reacts to what the
model learns, and early stopping and the kept "best" model are chosen on it; the forecasts it keeps
are worse than those a correctly scaled validation loss would keep.

Thread: https://github.com/Nixtla/neuralforecast/pull/720
"""
import copy

import numpy as np
import torch
from torch import nn


def make_panel(n_series=12, length=400, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(length)
    series = []
    for i in range(n_series):
        level = rng.uniform(100, 500)
        amp = rng.uniform(0.1, 0.3) * level
        period = rng.choice([12, 24])
        trend = rng.uniform(-0.1, 0.3) * t
        y = level + trend + amp * np.sin(2 * np.pi * t / period + rng.uniform(0, 6)) \
            + 0.05 * level * rng.normal(size=length)
        series.append(y)
    return torch.tensor(np.stack(series), dtype=torch.float32)


class MAE:
    is_distribution_output = False

    def __call__(self, y, y_hat, mask=None):
        if mask is None:
            mask = torch.ones_like(y)
        return (torch.abs(y - y_hat) * mask).sum() / mask.sum()


class MLPForecaster(nn.Module):
    def __init__(self, h, input_size, hidden_size=128, num_layers=2, val_size=48, test_size=48,
                 learning_rate=1e-3, max_steps=600, val_check_steps=25, early_stop_patience_steps=3,
                 windows_batch_size=64, seed=0):
        super().__init__()
        self.h, self.input_size = h, input_size
        self.loss, self.valid_loss = MAE(), MAE()
        self.val_size, self.test_size = val_size, test_size
        self.learning_rate, self.max_steps = learning_rate, max_steps
        self.val_check_steps, self.early_stop_patience_steps = val_check_steps, early_stop_patience_steps
        self.windows_batch_size = windows_batch_size
        self.gen = torch.Generator().manual_seed(seed)
        layers = [nn.Linear(input_size, hidden_size), nn.ReLU()]
        for _ in range(num_layers - 1):
            layers += [nn.Linear(hidden_size, hidden_size), nn.ReLU()]
        layers.append(nn.Linear(hidden_size, h))
        self.mlp = nn.Sequential(*layers)

    # -- windows
    def _create_windows(self, y, step):
        L, H = self.input_size, self.h
        n = y.shape[1]
        if step == "train":
            last = n - self.val_size - self.test_size
            sid = torch.randint(0, y.shape[0], (self.windows_batch_size,), generator=self.gen)
            start = torch.randint(0, last - L - H + 1, (self.windows_batch_size,), generator=self.gen)
        else:
            end = n - self.test_size if step == "val" else n
            first = end - (self.val_size if step == "val" else self.test_size)
            starts = torch.arange(first - L, end - L - H + 1)
            sid = torch.arange(y.shape[0]).repeat_interleave(len(starts))
            start = starts.repeat(y.shape[0])
        idx = start[:, None] + torch.arange(L + H)[None, :]
        return {"temporal": y[sid[:, None], idx]}

    def _normalization(self, windows):
        temporal = windows["temporal"]
        insample = temporal[:, : self.input_size]
        self._loc = insample.mean(1, keepdim=True)
        self._scale = insample.std(1, keepdim=True).clamp(min=1e-3)
        return {"temporal": (temporal - self._loc) / self._scale}

    def _inv_normalization(self, y_hat):
        return y_hat * self._scale + self._loc, self._loc, self._scale

    def _parse_windows(self, windows):
        insample_y = windows["temporal"][:, : self.input_size]
        outsample_y = windows["temporal"][:, self.input_size:]
        return insample_y, outsample_y

    def forward(self, windows_batch):
        return self.mlp(windows_batch["insample_y"])

    # -- steps
    def training_step(self, y):
        windows = self._normalization(self._create_windows(y, "train"))
        insample_y, outsample_y = self._parse_windows(windows)
        output = self(dict(insample_y=insample_y))
        return self.loss(y=outsample_y, y_hat=output)

    def _compute_valid_loss(self, outsample_y, output, outsample_mask=None):
        valid_loss = self.valid_loss(y=outsample_y, y_hat=output, mask=outsample_mask)
        return valid_loss

    def validation_step(self, y):
        windows = self._create_windows(y, "val")
        original_outsample_y = torch.clone(windows["temporal"][:, -self.h:])
        windows = self._normalization(windows)
        insample_y, _ = self._parse_windows(windows)
        output = self(dict(insample_y=insample_y))
        return self._compute_valid_loss(original_outsample_y, output)

    def predict_mae(self, y, step):
        windows = self._create_windows(y, step)
        target = windows["temporal"][:, -self.h:]
        windows = self._normalization(windows)
        insample_y, _ = self._parse_windows(windows)
        y_hat, _, _ = self._inv_normalization(self(dict(insample_y=insample_y)))
        return (y_hat - target).abs().mean().item()

    def fit(self, y):
        opt = torch.optim.Adam(self.parameters(), lr=self.learning_rate)
        best, best_state, bad = float("inf"), None, 0
        for step in range(1, self.max_steps + 1):
            self.train()
            loss = self.training_step(y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % self.val_check_steps == 0:
                self.eval()
                with torch.no_grad():
                    valid_loss = self.validation_step(y).item()
                print(f"step {step:4d} train_loss {loss.item():.4f} valid_loss {valid_loss:9.3f}")
                if valid_loss < best:
                    best, best_state, bad = valid_loss, copy.deepcopy(self.state_dict()), 0
                else:
                    bad += 1
                    if bad >= self.early_stop_patience_steps:
                        print(f"early stopping at step {step}")
                        break
        self.load_state_dict(best_state)


def main():
    torch.manual_seed(0)
    y = make_panel()
    model = MLPForecaster(h=12, input_size=48)
    model.fit(y)
    model.eval()
    with torch.no_grad():
        print(f"kept model: test MAE {model.predict_mae(y, 'test'):.3f}")


if __name__ == "__main__":
    main()
