"""The same trainer with validate() squeezing the prediction as fit() does: the validation loss is
the model's error."""
import copy

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_data(n, g):
    x = torch.randn(n, 6, generator=g)
    y = x @ torch.tensor([1.0, -2.0, 0.5, 0.0, 1.5, -1.0]) + 0.1 * torch.randn(n, generator=g)
    return TensorDataset(x, y)


class Trainer:
    def __init__(self, model, train_set, val_set):
        self.model = model
        self.train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
        self.val_loader = DataLoader(val_set, batch_size=128)
        self.criterion = nn.MSELoss()
        self.optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    def fit_epoch(self):
        self.model.train()
        for x, y in self.train_loader:
            loss = self.criterion(self.model(x).squeeze(1), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    def validate(self):
        self.model.eval()
        total = 0.0
        with torch.no_grad():
            for x, y in self.val_loader:
                total += self.criterion(self.model(x).squeeze(1), y).item() * len(y)
        return total / len(self.val_loader.dataset)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    trainer = Trainer(nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1)), make_data(2200, g),
                      make_data(512, g))
    best, best_state = None, None
    for epoch in range(3):
        trainer.fit_epoch()
        val = trainer.validate()
        if best is None or val < best:
            best, best_state = val, copy.deepcopy(trainer.model.state_dict())
        print(f"epoch {epoch} val {val:.4f}")


if __name__ == "__main__":
    main()
