"""A Lightning-style regression module driven by a small loop that imitates accumulate_grad_batches=2
with a GradScaler: training_step() returns a hand-written mean squared error, the loop divides it
by the two batches of the window, scales it and calls backward() for every batch, and unscales,
clips and steps every second batch: the step sees the window's mean gradient."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(12, 64), nn.GELU(), nn.Linear(64, 1))

    def training_step(self, batch):
        x, y = batch
        return ((self.net(x).squeeze(-1) - y) ** 2).mean()

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-3)


def fit(module, loader, epochs, accumulate_grad_batches=2, clip=0.5):
    optimizer = module.configure_optimizers()
    scaler = torch.amp.GradScaler("cpu")
    for epoch in range(epochs):
        for i, batch in enumerate(loader):
            loss = module.training_step(batch)
            scaler.scale(loss / accumulate_grad_batches).backward()
            if (i + 1) % accumulate_grad_batches == 0:
                scaler.unscale_(optimizer)
                nn.utils.clip_grad_norm_(module.parameters(), clip)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
        print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3200, 12, generator=g)
    y = x[:, :3].sum(1) + 0.1 * torch.randn(3200, generator=g)
    fit(Regressor(), DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g), epochs=2)


if __name__ == "__main__":
    main()
