"""Lightning-like hooks run by a small loop: configure_optimizers() returns a cosine schedule
with T_max=max_epochs stepped once per epoch ("interval": "epoch"), as its T_max is counted."""
import torch
import torch.nn.functional as F
from torch import nn


class LitRegressor(nn.Module):
    def __init__(self, max_epochs=10, lr=3e-3):
        super().__init__()
        self.max_epochs, self.lr = max_epochs, lr
        self.net = nn.Sequential(nn.Linear(6, 32), nn.GELU(), nn.Linear(32, 1))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch):
        x, y = batch
        return F.mse_loss(self(x), y)

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.lr)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=self.max_epochs)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch"}}


def fit(module, batches, epochs):
    conf = module.configure_optimizers()
    opt, sched = conf["optimizer"], conf["lr_scheduler"]
    for epoch in range(epochs):
        for batch in batches:
            loss = module.training_step(batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if sched["interval"] == "step":
                sched["scheduler"].step()
        if sched["interval"] == "epoch":
            sched["scheduler"].step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(480, 6, generator=g)
    y = (x[:, :2].sum(1, keepdim=True)).tanh()
    batches = [(x[i:i + 24], y[i:i + 24]) for i in range(0, 480, 24)]
    fit(LitRegressor(max_epochs=10), batches, epochs=10)


if __name__ == "__main__":
    main()
