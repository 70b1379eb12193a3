"""House-price regression from tabular features with a small MLP. A Trainer class builds its
DataLoader from the dataset it is given with shuffle=True, so each epoch draws the rows (stored
sorted by sale date in the source table) in a new random order."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def load_table(n=4800, seed=0):
    g = torch.Generator().manual_seed(seed)
    features = torch.randn(n, 12, generator=g)
    drift = torch.linspace(-1, 1, n).unsqueeze(1)   # rows sorted by sale date
    prices = features @ torch.randn(12, 1, generator=g) + 2 * drift + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(features + drift, prices)


class Trainer:
    def __init__(self, model, dataset, epochs=2):
        self.model, self.epochs = model, epochs
        self.loader = DataLoader(dataset, batch_size=64, shuffle=True)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def fit(self):
        for epoch in range(self.epochs):
            total = 0.0
            for x, y in self.loader:
                loss = F.mse_loss(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                total += loss.item()
            print(f"epoch {epoch} mse {total / len(self.loader):.4f}")


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Linear(64, 1))
    Trainer(model, load_table()).fit()


if __name__ == "__main__":
    main()
