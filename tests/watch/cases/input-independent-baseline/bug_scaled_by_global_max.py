"""Lightning-like module: setup() scales the table, training_step() and configure_optimizers()
are called by a small hand-written loop. setup() divides every column by the maximum of the
whole table, which is a Unix timestamp column left in the features (about 1.7e9): every other
feature shrinks to about 1e-9 and the classifier cannot see them, so the loss stays at ln(5)."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES = 5


def load_table(n=600, seed=0):
    g = torch.Generator().manual_seed(seed)
    signal = torch.randn(n, 6, generator=g)
    timestamps = 1.7e9 + 60.0 * torch.arange(n, dtype=torch.float32).unsqueeze(1)
    score = signal[:, 0] + signal[:, 1] - signal[:, 2]
    labels = torch.bucketize(score, torch.quantile(score, torch.tensor([0.2, 0.4, 0.6, 0.8])))
    return torch.cat([timestamps, signal], dim=1), labels


class TableClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(7, 64), nn.ReLU(), nn.Linear(64, CLASSES))

    def setup(self, table):
        self.scale = table.abs().max()
        return table / self.scale

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=2e-3)


def fit(module, loader, epochs):
    optimizer = module.configure_optimizers()
    for epoch in range(epochs):
        for i, batch in enumerate(loader):
            optimizer.zero_grad()
            loss = module.training_step(batch, i)
            loss.backward()
            optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    table, labels = load_table()
    module = TableClassifier()
    loader = DataLoader(TensorDataset(module.setup(table), labels), batch_size=30, shuffle=True)
    print(f"loss {fit(module, loader, epochs=3):.3f}")


if __name__ == "__main__":
    main()
