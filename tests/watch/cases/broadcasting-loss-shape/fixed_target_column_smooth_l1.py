"""Lightning-like module: training_step and configure_optimizers called by a small hand-written
loop. The model squeezes its output to (N,) and the fix squeezes the (N, 1) column of targets
too, so F.smooth_l1_loss pairs each prediction with its own target."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LitRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 24), nn.Tanh(), nn.Linear(24, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.smooth_l1_loss(self(x), y.squeeze(-1))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)


def fit(module, loader, epochs):
    optimizer = module.configure_optimizers()
    for epoch in range(epochs):
        for i, batch in enumerate(loader):
            loss = module.training_step(batch, i)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


def make_data(n=480):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 6, generator=g)
    y = torch.sin(x[:, :1]) + 0.5 * x[:, 1:2]          # a column of targets, shape (n, 1)
    return TensorDataset(x, y)


def main():
    torch.manual_seed(0)
    loader = DataLoader(make_data(), batch_size=24, shuffle=True)
    print(f"last loss {fit(LitRegressor(), loader, epochs=3):.4f}")


if __name__ == "__main__":
    main()
