"""A small Lightning-like loop: the module's training_step returns the loss, and the runner's
automatic-optimization path calls optimizer.zero_grad() and optimizer.step() around it. The
automatic path calls backward() itself between them; manual_backward() is used only in manual
optimization mode."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    automatic_optimization = True

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 64), nn.Tanh(), nn.Linear(64, 1))

    def training_step(self, batch):
        x, y = batch
        return F.mse_loss(self.net(x).squeeze(1), y)

    def manual_backward(self, loss):
        loss.backward()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)


class Runner:
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, module, loader):
        optimizer = module.configure_optimizers()
        for epoch in range(self.max_epochs):
            for batch in loader:
                loss = module.training_step(batch)
                optimizer.zero_grad()
                if module.automatic_optimization:
                    loss.backward()
                else:
                    module.manual_backward(loss)
                optimizer.step()
            print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 10, generator=g)
    y = torch.sin(x[:, 0]) + 0.5 * x[:, 1]
    Runner(max_epochs=3).fit(Regressor(), DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True))


if __name__ == "__main__":
    main()
