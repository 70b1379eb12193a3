"""A Trainer class fits a regression MLP whose head is nn.Linear(hidden, 1), with nn.MSELoss
against the (N,) targets a TensorDataset returns: the (N, 1) prediction and the (N,) target
broadcast to (N, N), so every prediction is scored against every target of the batch."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self, features=8, hidden=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.body(x)


class Trainer:
    def __init__(self, model, loader, lr=1e-2):
        self.model, self.loader = model, loader
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.criterion = nn.MSELoss()

    def zero(self):
        self.optimizer.zero_grad()

    def train_epoch(self):
        total = 0.0
        for x, y in self.loader:
            self.zero()
            loss = self.criterion(self.model(x), y)
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        return total / len(self.loader)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=g)
    y = x @ torch.randn(8, generator=g) + 0.1 * torch.randn(512, generator=g)
    trainer = Trainer(Regressor(), DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True))
    for epoch in range(4):
        loss = trainer.train_epoch()
    print(f"train mse {loss:.3f}")


if __name__ == "__main__":
    main()
