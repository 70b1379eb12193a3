"""A class-based trainer standardizes each batch's regression targets with their own mean and
std; the loader drops the incomplete last batch, so no batch has a single sample (whose unbiased
std would be NaN)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def standardize(y):
    return (y - y.mean()) / y.std()


class Trainer:
    def __init__(self, model, dataset, batch_size=32):
        self.model = model
        self.loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.criterion = nn.MSELoss()

    def train_epoch(self):
        self.model.train()
        for x, y in self.loader:
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(x).squeeze(-1), standardize(y))
            loss.backward()
            self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(321, 6, generator=g)
    y = 50.0 + 10.0 * (x[:, 0] - 2 * x[:, 1]) + torch.randn(321, generator=g)
    trainer = Trainer(nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1)), TensorDataset(x, y))
    for epoch in range(5):
        loss = trainer.train_epoch()
    print(f"loss {loss}")


if __name__ == "__main__":
    main()
