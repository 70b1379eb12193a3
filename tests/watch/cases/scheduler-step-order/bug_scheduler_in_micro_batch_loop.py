"""A Trainer whose step() splits each batch into micro-batches to save memory, calls backward on
each and optimizer.step() once at the end, but advances the cosine schedule inside the
micro-batch loop: with 4 micro-batches the schedule (T_max in updates) ends a quarter of the way
through training."""
import torch
import torch.nn.functional as F
from torch import nn


class Trainer:
    def __init__(self, model, updates, micro=4):
        self.model, self.micro = model, micro
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        self.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=updates)

    def step(self, x, y):
        self.optimizer.zero_grad()
        for xm, ym in zip(x.chunk(self.micro), y.chunk(self.micro)):
            loss = F.mse_loss(self.model(xm), ym) / self.micro
            loss.backward()
            self.scheduler.step()
        self.optimizer.step()
        return loss.item() * self.micro


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
    trainer = Trainer(model, updates=100)
    for update in range(100):
        x = torch.randn(64, 8, generator=g)
        loss = trainer.step(x, x[:, :2].sum(1, keepdim=True))
        if update % 25 == 0:
            print(f"update {update} loss {loss:.4f}")


if __name__ == "__main__":
    main()
