"""A heteroscedastic regressor (mean and log-variance heads) trained by a Trainer class with fp16
autocast and a GradScaler; the fix: the log-variance leaves autocast and exp() runs in float32,
so it cannot overflow and the gradients stay finite (the GradScaler's scale levels off)."""
import math

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class GaussianRegressor(nn.Module):
    def __init__(self, features, target_var):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.mean = nn.Linear(64, 1)
        self.log_var = nn.Linear(64, 1)
        nn.init.constant_(self.log_var.bias, math.log(target_var))  # start at the targets' variance

    def forward(self, x):
        h = self.body(x)
        return self.mean(h), self.log_var(h)


class Trainer:
    def __init__(self, model, lr=1e-3):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.scaler = torch.amp.GradScaler("cpu")

    def loss(self, x, y):
        with torch.autocast("cpu", dtype=torch.float16):
            mean, log_var = self.model(x)
        var = torch.exp(log_var.float()).clamp(1e-3, 1e4)
        return 0.5 * (torch.log(var.float()) + (y - mean.float()) ** 2 / var.float()).mean()

    def train_step(self, x, y):
        self.optimizer.zero_grad()
        loss = self.loss(x, y)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 12, generator=g)
    y = 1500 + 400 * x[:, :3].sum(1, keepdim=True) + 100 * torch.randn(1024, 1, generator=g)  # prices
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    trainer = Trainer(GaussianRegressor(12, float(y.var())))
    for x, y in loader:
        loss = trainer.train_step(x, y)
    print(f"loss {loss:.3f}, scale {trainer.scaler.get_scale():.3g}")


if __name__ == "__main__":
    main()
