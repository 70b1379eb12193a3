"""A scikit-learn style wrapper: NeuralNetClassifier(module, criterion=nn.NLLLoss, optimizer, lr,
max_epochs, batch_size).fit(X, y) runs the epoch and batch loops itself, the module ends in
softmax as the wrapper's documentation asks, and get_loss() turns the probabilities into
log-probabilities with a plain torch.log(y_pred) before NLLLoss. Run on an MNIST-sized MLP with the
optimizer switched from SGD to Adam, some softmax outputs underflow to exactly 0, log gives -inf
and its backward 0 * inf = NaN, and from then on the loss and every weight are NaN while fit()
keeps going and prints its epoch table.

Thread: https://github.com/skorch-dev/skorch/issues/481
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class ClassifierModule(nn.Module):
    def __init__(self, input_dim=784, hidden_dim=98, output_dim=10, dropout=0.5):
        super().__init__()
        self.hidden = nn.Linear(input_dim, hidden_dim)
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(hidden_dim, output_dim)

    def forward(self, X):
        X = F.relu(self.hidden(X))
        X = self.dropout(X)
        return F.softmax(self.output(X), dim=-1)


class NeuralNetClassifier:
    def __init__(self, module, criterion=nn.NLLLoss, optimizer=torch.optim.SGD, lr=0.1, max_epochs=10,
                 batch_size=128):
        self.module, self.criterion, self.optimizer = module, criterion, optimizer
        self.lr, self.max_epochs, self.batch_size = lr, max_epochs, batch_size

    def initialize(self):
        self.module_ = self.module()
        self.criterion_ = self.criterion()
        self.optimizer_ = self.optimizer(self.module_.parameters(), lr=self.lr)
        return self

    def get_loss(self, y_pred, y_true):
        if isinstance(self.criterion_, nn.NLLLoss):
            y_pred = torch.log(y_pred)
        return self.criterion_(y_pred, y_true)

    def train_step(self, Xi, yi):
        self.module_.train()
        self.optimizer_.zero_grad()
        loss = self.get_loss(self.module_(Xi), yi)
        loss.backward()
        self.optimizer_.step()
        return loss.item()

    def fit(self, X, y):
        self.initialize()
        X, y = torch.as_tensor(X), torch.as_tensor(y)
        n_valid = len(X) // 5
        X_tr, y_tr, X_va, y_va = X[n_valid:], y[n_valid:], X[:n_valid], y[:n_valid]
        g = torch.Generator().manual_seed(0)
        for epoch in range(1, self.max_epochs + 1):
            perm = torch.randperm(len(X_tr), generator=g)
            losses = [self.train_step(X_tr[idx], y_tr[idx]) for idx in perm.split(self.batch_size)]
            self.module_.eval()
            with torch.no_grad():
                proba = self.module_(X_va)
                valid_loss = self.get_loss(proba, y_va).item()
                valid_acc = (proba.argmax(1) == y_va).float().mean().item()
            print(f"{epoch:5d}  train_loss {np.mean(losses):.4f}  valid_loss {valid_loss:.4f}  valid_acc {valid_acc:.4f}")
        return self


def mnist_like(n, seed):
    """784-pixel 'digits' in [0, 1]: a stroke template per class plus pixel noise."""
    rng = np.random.default_rng(seed)
    templates = (np.random.default_rng(5).random((10, 784)) < 0.2).astype(np.float32)
    y = rng.integers(0, 10, n)
    X = np.clip(templates[y] * rng.uniform(0.6, 1.0, (n, 1)) + 0.3 * rng.random((n, 784)), 0, 1)
    return X.astype(np.float32), y.astype(np.int64)


def main():
    torch.manual_seed(0)
    X, y = mnist_like(6000, seed=0)
    net = NeuralNetClassifier(ClassifierModule, criterion=nn.NLLLoss, optimizer=torch.optim.Adam,
                              lr=0.1, max_epochs=4, batch_size=128)
    net.fit(X, y)


if __name__ == "__main__":
    main()
