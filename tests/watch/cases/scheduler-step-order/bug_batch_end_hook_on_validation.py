"""A small callback-driven loop in the Lightning style: the Loop calls module.on_batch_end() after
every batch it runs, training and validation alike, and the regression module steps its cosine
per-batch scheduler in that hook. The validation batches therefore advance the learning-rate
schedule too, and the cosine decay runs ahead of the updates."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 1))

    def forward(self, x):
        return self.net(x)

    def configure_optimizers(self, total_steps):
        self.optimizer = torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)
        self.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=total_steps)
        return self.optimizer

    def step_loss(self, batch):
        x, y = batch
        return F.mse_loss(self(x), y)

    def on_batch_end(self):
        self.scheduler.step()


class Loop:
    def __init__(self, module, epochs=2):
        self.module, self.epochs = module, epochs

    def run(self, train_loader, val_loader):
        optimizer = self.module.configure_optimizers(self.epochs * len(train_loader))
        for epoch in range(self.epochs):
            for batch in train_loader:
                loss = self.module.step_loss(batch)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                self.module.on_batch_end()
            with torch.no_grad():
                val = 0.0
                for batch in val_loader:
                    val += self.module.step_loss(batch).item()
                    self.module.on_batch_end()
            print(f"epoch {epoch} val mse {val / len(val_loader):.4f}")


def data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    return TensorDataset(x, x[:, :2].sum(dim=1, keepdim=True) + 0.1 * torch.randn(n, 1, generator=g))


def main():
    torch.manual_seed(0)
    Loop(Regressor()).run(DataLoader(data(1600, 0), batch_size=32, shuffle=True),
                          DataLoader(data(400, 1), batch_size=50))


if __name__ == "__main__":
    main()
