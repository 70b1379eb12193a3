"""Lightning-like module: train_dataloader(), training_step() and configure_optimizers() called by
a small hand-written loop. The training set is a ConcatDataset of one dataset per class and
the fix has train_dataloader() shuffle it, so every batch mixes the classes."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import ConcatDataset, DataLoader, TensorDataset

CLASSES = 5


class LitClassifier(nn.Module):
    def __init__(self, datasets):
        super().__init__()
        self.datasets = datasets
        self.net = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, CLASSES))

    def forward(self, x):
        return F.log_softmax(self.net(x), dim=1)

    def train_dataloader(self):
        return DataLoader(ConcatDataset(self.datasets), batch_size=24, shuffle=True)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.nll_loss(self(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=2e-3)


def fit(module, epochs):
    optimizer = module.configure_optimizers()
    loader = module.train_dataloader()
    for epoch in range(epochs):
        for i, batch in enumerate(loader):
            optimizer.zero_grad()
            loss = module.training_step(batch, i)
            loss.backward()
            optimizer.step()
    return loss.item()


def per_class_datasets(n=96):
    g = torch.Generator().manual_seed(0)
    shift = torch.randn(CLASSES, 10, generator=g)
    return [TensorDataset(shift[c] + torch.randn(n, 10, generator=g), torch.full((n,), c)) for c in range(CLASSES)]


def main():
    torch.manual_seed(0)
    print(f"last loss {fit(LitClassifier(per_class_datasets()), epochs=3):.3f}")


if __name__ == "__main__":
    main()
