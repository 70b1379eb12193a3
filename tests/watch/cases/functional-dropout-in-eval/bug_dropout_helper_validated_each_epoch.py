"""A tabular feature classifier trained by a Trainer class: the model's forward sends each hidden
layer through a module-level helper `apply_dropout(x, rate)` that calls F.dropout(x, rate) and never
hears of the model's mode. Trainer.fit() validates under model.eval() and no_grad only at the end of
each 80-batch epoch, so within the first 50 steps the model has only trained; the helper will keep
dropping a third of the units in every validation pass."""
import torch
import torch.nn.functional as F
from torch import nn


def apply_dropout(x, rate):
    return F.dropout(x, rate)


class FeatureNet(nn.Module):
    def __init__(self, dims=(24, 96, 96), classes=4, rate=0.3):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
        self.head = nn.Linear(dims[-1], classes)
        self.rate = rate

    def forward(self, x):
        for layer in self.layers:
            x = apply_dropout(F.gelu(layer(x)), self.rate)
        return self.head(x)


class Trainer:
    def __init__(self, model, lr=2e-3, batch_size=16):
        self.model, self.batch_size = model, batch_size
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

    def _train_epoch(self, x, y, g):
        self.model.train()
        order = torch.randperm(len(x), generator=g)
        for i in range(0, len(x), self.batch_size):
            idx = order[i:i + self.batch_size]
            loss = F.cross_entropy(self.model(x[idx]), y[idx])
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()

    def _validate(self, x, y):
        self.model.eval()
        with torch.no_grad():
            return (self.model(x).argmax(1) == y).float().mean().item()

    def fit(self, train, val, epochs=2, seed=0):
        g = torch.Generator().manual_seed(seed)
        for epoch in range(epochs):
            loss = self._train_epoch(*train, g)
            print(f"epoch {epoch} loss {loss:.3f} val acc {self._validate(*val):.3f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    w = torch.randn(24, 4, generator=g)
    x = torch.randn(1536, 24, generator=g)
    y = (x @ w).argmax(1)
    Trainer(FeatureNet()).fit((x[:1280], y[:1280]), (x[1280:], y[1280:]))


if __name__ == "__main__":
    main()
