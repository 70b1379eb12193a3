"""Lightning-like hooks called by a small hand-written loop that honours the scheduler's
"interval": configure_optimizers() returns an ExponentialLR(gamma=0.5) meant to halve the
learning rate every epoch, but declares "interval": "step", so it halves it every batch."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LitModel(nn.Module):
    def __init__(self, lr=0.01):
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(12, 48), nn.Tanh(), nn.Linear(48, 3))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)
        scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.5)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def fit(module, loader, epochs):
    config = module.configure_optimizers()
    optimizer, scheduler = config["optimizer"], config["lr_scheduler"]
    for epoch in range(epochs):
        for batch_idx, batch in enumerate(loader):
            optimizer.zero_grad()
            loss = module.training_step(batch, batch_idx)
            loss.backward()
            optimizer.step()
            if scheduler["interval"] == "step":
                scheduler["scheduler"].step()
        if scheduler["interval"] == "epoch":
            scheduler["scheduler"].step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(384, 12, generator=g)
    y = (x[:, :3] * torch.tensor([1.0, 2.0, -1.0])).argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    print(f"loss {fit(LitModel(), loader, epochs=5):.3f}")


if __name__ == "__main__":
    main()
