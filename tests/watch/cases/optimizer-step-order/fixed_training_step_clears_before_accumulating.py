"""A Lightning-style module driven by a small fit loop with accumulate_grad_batches=3: the module's
training_step(batch, batch_idx) returns the loss, the loop calls backward on it, steps the
optimizer every third batch and clears the gradients right after each step, so all three batches
reach the update."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1))
        self._optimizer = None

    def configure_optimizers(self):
        self._optimizer = torch.optim.Adam(self.parameters(), lr=3e-3)
        return self._optimizer

    def optimizers(self):
        return self._optimizer

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.mse_loss(self.net(x).squeeze(-1), y)


def fit(module, loader, epochs=2, accumulate_grad_batches=3):
    optimizer = module.configure_optimizers()
    for epoch in range(epochs):
        for batch_idx, batch in enumerate(loader):
            loss = module.training_step(batch, batch_idx) / accumulate_grad_batches
            loss.backward()
            if (batch_idx + 1) % accumulate_grad_batches == 0:
                optimizer.step()
                optimizer.zero_grad()
        print(f"epoch {epoch} loss {loss.item() * accumulate_grad_batches:.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1200, 10, generator=g)
    y = x[:, 0] * 2 - x[:, 1]
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True, generator=g)
    fit(Regressor(), loader)


if __name__ == "__main__":
    main()
