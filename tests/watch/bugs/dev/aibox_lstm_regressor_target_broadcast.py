"""A scikit-learn-style LSTM estimator for text regression: fit(X, y) pads the variable-length
sequences of per-sentence feature vectors into (batch, max_len, features), builds an
nn.Sequential of a batch-first LSTM, a module that keeps the last time step and a Linear(hidden, 1)
head, and trains it with AdamW and MSELoss over a DataLoader. The head returns predictions shaped
(batch, 1) while the targets stay (batch,), so MSELoss broadcasts them to (batch, batch) and every
prediction is pulled towards every target in the batch: the regressor only learns the mean score.

Thread: https://github.com/aiboxlab/nlp/issues/97
"""
import torch
from torch import nn, optim
from torch.nn.utils.rnn import pad_sequence


class _LastStep(nn.Module):
    def forward(self, x):
        seq, _ = x                      # LSTM returns (output, (h, c))
        return seq[:, -1, :]


class LSTMEstimator:
    def __init__(self, hidden_size=20, num_layers=2, kind="regressor", epochs=10,
                 learning_rate=1e-3, train_batch_size=256):
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.kind = kind
        self.epochs = epochs
        self.lr = learning_rate
        self.batch_size = train_batch_size
        self.criterion = nn.CrossEntropyLoss() if kind == "classifier" else nn.MSELoss()
        self.model = None

    @staticmethod
    def _pad(X):
        return pad_sequence([torch.as_tensor(x, dtype=torch.float32) for x in X],
                            batch_first=True, padding_value=0.0)

    def _build(self, n_features, n_out):
        self.model = nn.Sequential(
            nn.LSTM(n_features, self.hidden_size, self.num_layers, batch_first=True),
            _LastStep(),
            nn.Linear(self.hidden_size, n_out),
        )

    def fit(self, X, y):
        X = self._pad(X)
        y = torch.as_tensor(y, dtype=torch.float32)
        self._build(X.size(2), 1)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y),
                                             batch_size=self.batch_size)
        opt = optim.AdamW(self.model.parameters(), lr=self.lr)
        step = 0
        for epoch in range(self.epochs):
            for inputs, targets in loader:
                opt.zero_grad()
                outputs = self.model(inputs)
                loss = self.criterion(outputs, targets)
                loss.backward()
                opt.step()
                step += 1
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        return self

    def predict(self, X):
        with torch.no_grad():
            return self.model(self._pad(X)).squeeze(-1)


def essays(n, seed):
    """Each essay is a sequence of sentence feature vectors; its score follows the features."""
    g = torch.Generator().manual_seed(seed)
    X, y = [], []
    for _ in range(n):
        length = int(torch.randint(5, 16, (1,), generator=g))
        feats = torch.randn(length, 8, generator=g)
        score = 5.0 + 1.5 * feats[:, 0].mean() * length ** 0.5 - 0.8 * feats[-3:, 1].mean()
        X.append(feats)
        y.append(float(score + 0.1 * torch.randn(1, generator=g)))
    return X, torch.tensor(y)


def main():
    torch.manual_seed(0)
    X_train, y_train = essays(2000, 0)
    X_test, y_test = essays(400, 1)
    est = LSTMEstimator(epochs=10).fit(X_train, y_train)
    pred = est.predict(X_test)
    mse = ((pred - y_test) ** 2).mean().item()
    print(f"test MSE {mse:.3f}  (variance of the scores {y_test.var().item():.3f})"
          f"  prediction std {pred.std().item():.3f}")


if __name__ == "__main__":
    main()
