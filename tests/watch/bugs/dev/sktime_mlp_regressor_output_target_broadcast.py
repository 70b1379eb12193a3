"""An sktime-style deep time-series regressor: an abstract BaseDeepRegressorTorch owns fit(), which
builds the network, instantiates the criterion (MSELoss by name) and the optimizer (Adam by
default), wraps X and y in a DataLoader that yields ({"X": batch}, y) pairs, and runs _run_epoch for
each epoch; _run_epoch calls network(**inputs), computes the loss, then zero_grad / backward / step.
An MLPRegressorTorch subclass supplies _build_network: flatten the (channels, length) series and a
few Linear+ReLU layers ending in Linear(hidden, 1). predict() squeezes the last axis.

Bug: the dataloader hands the criterion targets shaped (batch,) while this network emits
(batch, 1), and nothing reconciles them before the loss, so MSELoss broadcasts the two into a
(batch, batch) grid and every prediction is regressed toward every target of the batch. The
optimum of that objective is the batch mean, so the regressor learns to ignore its input and the
loss settles near the target variance. The maintainers confirmed it and merged a fix that squeezes
a trailing singleton off the prediction before the criterion.

Thread: https://github.com/sktime/sktime/issues/10931
"""
import numpy as np
import torch
from torch import nn


class BaseDeepRegressorTorch:
    def __init__(self, num_epochs=16, batch_size=8, criterion=None, optimizer=None, lr=1e-3,
                 verbose=True, random_state=None):
        self.num_epochs = num_epochs
        self.batch_size = batch_size
        self.criterion = criterion
        self.optimizer = optimizer
        self.lr = lr
        self.verbose = verbose
        self.random_state = random_state
        if random_state is not None:
            torch.manual_seed(random_state)

    # --- hooks for subclasses -------------------------------------------------
    def _build_network(self, X):
        raise NotImplementedError

    # --- plumbing -------------------------------------------------------------
    def _instantiate_criterion(self):
        name = self.criterion or "mseloss"
        table = {"mseloss": nn.MSELoss, "l1loss": nn.L1Loss, "huberloss": nn.HuberLoss}
        return table[name.lower()]()

    def _instantiate_optimizer(self):
        if not self.optimizer:
            return torch.optim.Adam(self.network.parameters(), lr=self.lr)
        return getattr(torch.optim, self.optimizer)(self.network.parameters(), lr=self.lr)

    def _build_dataloader(self, X, y=None):
        X = torch.as_tensor(X, dtype=torch.float32)
        if y is None:
            y = torch.zeros(len(X))
        y = torch.as_tensor(y, dtype=torch.float32)

        class _Data(torch.utils.data.Dataset):
            def __len__(self_inner):
                return len(X)

            def __getitem__(self_inner, i):
                return {"X": X[i]}, y[i]

        return torch.utils.data.DataLoader(_Data(), batch_size=self.batch_size, shuffle=True)

    def fit(self, X, y):
        self.network = self._build_network(X)
        self._criterion = self._instantiate_criterion()
        self._optimizer = self._instantiate_optimizer()
        dataloader = self._build_dataloader(X, y)
        self.network.train()
        for epoch in range(self.num_epochs):
            self._run_epoch(epoch, dataloader)
        return self

    def _run_epoch(self, epoch, dataloader):
        losses = []
        for inputs, outputs in dataloader:
            y_pred = self.network(**inputs)
            loss = self._criterion(y_pred, outputs)
            self._optimizer.zero_grad()
            loss.backward()
            self._optimizer.step()
            losses.append(loss.item())
        if self.verbose:
            print(f"Epoch {epoch + 1}: Loss: {np.average(losses):.4f}")

    def predict(self, X):
        self.network.eval()
        X = torch.as_tensor(X, dtype=torch.float32)
        with torch.no_grad():
            out = self.network(X=X)
        return out.squeeze(-1).numpy()


class _MLPNetwork(nn.Module):
    def __init__(self, n_channels, series_length, hidden=64):
        super().__init__()
        self.body = nn.Sequential(
            nn.Flatten(),
            nn.Linear(n_channels * series_length, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, X):
        return self.body(X)


class MLPRegressorTorch(BaseDeepRegressorTorch):
    def __init__(self, hidden=64, **kwargs):
        super().__init__(**kwargs)
        self.hidden = hidden

    def _build_network(self, X):
        _, n_channels, length = X.shape
        return _MLPNetwork(n_channels, length, self.hidden)


def make_series(n, seed):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, 24)
    amp = rng.uniform(0.5, 2.0, size=n)
    freq = rng.uniform(1.0, 4.0, size=n)
    X = np.stack([amp[:, None] * np.sin(2 * np.pi * freq[:, None] * t),
                  np.cos(2 * np.pi * freq[:, None] * t)], axis=1)
    X += 0.05 * rng.standard_normal(X.shape)
    y = 3.0 * amp + 1.5 * freq + 0.1 * rng.standard_normal(n)
    return X.astype(np.float32), y.astype(np.float32)


def main():
    X_train, y_train = make_series(320, 0)
    X_test, y_test = make_series(200, 1)
    reg = MLPRegressorTorch(num_epochs=8, batch_size=16, random_state=0)
    reg.fit(X_train, y_train)
    pred = reg.predict(X_test)
    mse = float(np.mean((pred - y_test) ** 2))
    print(f"test MSE {mse:.3f}")


if __name__ == "__main__":
    main()
