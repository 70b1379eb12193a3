"""A Trainer with early-stopping bookkeeping: after each short epoch it evaluates, keeps a deep copy
of the best model so far, and when the validation loss got worse it goes back to the best one
with self.model = copy.deepcopy(self.best_model). The optimizer was built in __init__ for the
first model object and is never rebuilt, so after the first restore it steps parameters that no
forward pass uses: the model being trained gets gradients that nothing applies."""
import copy

import torch
import torch.nn.functional as F
from torch import nn


class Trainer:
    def __init__(self, model, lr=0.05):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.best_model, self.best_loss = copy.deepcopy(model), float("inf")

    @torch.no_grad()
    def validate(self, x, y):
        return F.mse_loss(self.model(x), y).item()

    def fit(self, train, val, epochs, batch_size=32):
        x, y = train
        for epoch in range(epochs):
            for i in range(0, len(x), batch_size):
                loss = F.mse_loss(self.model(x[i:i + batch_size]), y[i:i + batch_size])
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            val_loss = self.validate(*val)
            if val_loss < self.best_loss:
                self.best_model, self.best_loss = copy.deepcopy(self.model), val_loss
            else:
                self.model = copy.deepcopy(self.best_model)
            print(f"epoch {epoch} val {val_loss:.4f}")


def make(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=g)
    return x, (x[:, :1] * 2 - x[:, 1:2]) + 0.5 * torch.randn(n, 1, generator=g)


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))
    Trainer(model, lr=0.05).fit(make(160, 0), make(64, 1), epochs=14)


if __name__ == "__main__":
    main()
