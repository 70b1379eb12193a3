"""An ES-RNN forecaster in the style of a PyTorch port of Smyl's M4 winner, applied to M5-like
daily sales: an ESRNN object with fit(X_df, y_df) that builds a per-series data loader and trains an
_ESRNN module made of _ES (per-series level and seasonality smoothing coefficients and initial
seasonalities held in embeddings, Holt-Winters recursion over the window) and _RNN (LSTM over
input windows of log(y / level / seasonality), linear head for the horizon); the training loop runs
epochs of batches of series with Adam, gradient clipping and a pinball (quantile 0.5) loss on the
normalised output windows, printing "Training loss (50 prc)" and a test loss each epoch. The bug:
the model normalises each series by its own previous values (the initial level is the first
observation) and takes logs, and several intermittent-demand series start with a zero sale, so the
first input window holds log(0) = -inf (the initial level is 0 as well), the LSTM output and the
loss are nan from the first batch, and after the first Adam step every parameter is nan; the run
finishes printing nan losses. The fix confirmed in the thread was to add a constant to the targets
so that no series starts at zero (and subtract it from the forecasts).

Thread: https://github.com/kdgutier/esrnn_torch/issues/5
"""
import numpy as np
import torch
from torch import nn

SEASONALITY, INPUT_SIZE, OUTPUT_SIZE = 7, 14, 7


def make_sales(n_series, length, rng):
    t = np.arange(length)
    week = 1.0 + 0.3 * np.sin(2 * np.pi * t / SEASONALITY)
    y = []
    for i in range(n_series):
        scale = rng.uniform(20.0, 60.0)
        s = rng.poisson(scale * week * (1.0 + 0.005 * t)).astype(np.float32)
        if i % 4 == 0:  # intermittent item: zero sales on the first day
            s[0] = 0.0
        y.append(s)
    return np.stack(y)


class _ES(nn.Module):
    def __init__(self, n_series):
        super().__init__()
        self.lev_sms = nn.Embedding(n_series, 1)
        self.seas_sms = nn.Embedding(n_series, 1)
        self.init_seas = nn.Embedding(n_series, SEASONALITY)
        nn.init.constant_(self.lev_sms.weight, 0.5)
        nn.init.constant_(self.seas_sms.weight, 0.5)
        nn.init.constant_(self.init_seas.weight, 0.5)

    def forward(self, y, idx):
        lev_sms = torch.sigmoid(self.lev_sms(idx).squeeze(1))
        seas_sms = torch.sigmoid(self.seas_sms(idx).squeeze(1))
        seas = [torch.exp(self.init_seas(idx)[:, k]) for k in range(SEASONALITY)]
        seas.append(seas[0])
        levels = [y[:, 0] / seas[0]]
        for t in range(1, y.shape[1]):
            new_lev = lev_sms * (y[:, t] / seas[t]) + (1 - lev_sms) * levels[t - 1]
            levels.append(new_lev)
            seas.append(seas_sms * (y[:, t] / new_lev) + (1 - seas_sms) * seas[t])
        return torch.stack(levels, 1), torch.stack(seas, 1)


class _RNN(nn.Module):
    def __init__(self, hidden=24):
        super().__init__()
        self.lstm = nn.LSTM(INPUT_SIZE, hidden, batch_first=True)
        self.head = nn.Linear(hidden, OUTPUT_SIZE)

    def forward(self, x):
        h, _ = self.lstm(x)
        return self.head(h)


class _ESRNN(nn.Module):
    def __init__(self, n_series):
        super().__init__()
        self.es, self.rnn = _ES(n_series), _RNN()

    def windows(self, y, idx):
        levels, seas = self.es(y, idx)
        xs, ys = [], []
        for t in range(INPUT_SIZE, y.shape[1] - OUTPUT_SIZE + 1):
            lev = levels[:, t - 1:t]
            xs.append(torch.log(y[:, t - INPUT_SIZE:t] / seas[:, t - INPUT_SIZE:t] / lev))
            ys.append(torch.log(y[:, t:t + OUTPUT_SIZE] / seas[:, t:t + OUTPUT_SIZE] / lev))
        return torch.stack(xs, 1), torch.stack(ys, 1)

    def forward(self, y, idx):
        x, target = self.windows(y, idx)
        return self.rnn(x), target


def pinball_loss(y, y_hat, tau=0.5):
    delta = y - y_hat
    return torch.max(tau * delta, (tau - 1) * delta).mean()


class ESRNN:
    def __init__(self, max_epochs=12, batch_size=8, learning_rate=5e-3, gradient_clipping_threshold=20.0, seed=0):
        self.max_epochs, self.batch_size, self.lr = max_epochs, batch_size, learning_rate
        self.clip, self.seed = gradient_clipping_threshold, seed

    def fit(self, y_train, y_test):
        torch.manual_seed(self.seed)
        n = y_train.shape[0]
        self.esrnn = _ESRNN(n)
        optimizer = torch.optim.Adam(self.esrnn.parameters(), lr=self.lr)
        y_train, y_full = torch.as_tensor(y_train), torch.as_tensor(np.concatenate([y_train, y_test], 1))
        print("=============== Training ESRNN ===============")
        for epoch in range(self.max_epochs):
            self.esrnn.train()
            perm = torch.randperm(n)
            losses = []
            for s in range(0, n, self.batch_size):
                idx = perm[s:s + self.batch_size]
                optimizer.zero_grad()
                y_hat, target = self.esrnn(y_train[idx], idx)
                loss = pinball_loss(target, y_hat)
                loss.backward()
                nn.utils.clip_grad_norm_(self.esrnn.parameters(), self.clip)
                optimizer.step()
                losses.append(loss.item())
            self.esrnn.eval()
            with torch.no_grad():
                idx = torch.arange(n)
                y_hat, target = self.esrnn(y_full, idx)
                test_loss = pinball_loss(target[:, -1], y_hat[:, -1]).item()
            print(f"========= Epoch {epoch} finished =========")
            print(f"Training loss (50 prc): {np.mean(losses):.5f}")
            print(f"Testing loss (50 prc): {test_loss:.5f}")
        return self


def main():
    rng = np.random.default_rng(0)
    y = make_sales(40, 84, rng)
    ESRNN().fit(y[:, :-OUTPUT_SIZE], y[:, -OUTPUT_SIZE:])


if __name__ == "__main__":
    main()
