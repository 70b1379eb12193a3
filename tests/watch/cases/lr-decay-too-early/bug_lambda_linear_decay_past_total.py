"""A Trainer builds a LambdaLR whose factor is 1 - step / total_steps after a short warmup, with
total_steps taken from a config field counted in optimizer updates for 4-way gradient accumulation
that the trainer does not do: the loop steps 4x more often than planned, the factor passes 0 a
quarter of the way in and goes on to negative values, so the lr in param_groups turns negative and
every later step climbs the loss."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Config:
    epochs = 3
    batch_size = 32
    accumulation = 4
    lr = 2e-3
    warmup = 4


class Trainer:
    def __init__(self, model, loader, config):
        self.model, self.loader, self.config = model, loader, config
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
        total_steps = config.epochs * len(loader) // config.accumulation
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: self.factor(s, total_steps))

    def factor(self, step, total_steps):
        if step < self.config.warmup:
            return (step + 1) / self.config.warmup
        return 1.0 - step / total_steps

    def train_step(self, x, y):
        self.model.train()
        loss = F.mse_loss(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        return loss.item()

    def fit(self):
        for epoch in range(self.config.epochs):
            losses = [self.train_step(x, y) for x, y in self.loader]
            print(f"epoch {epoch} loss {sum(losses) / len(losses):.4f} lr {self.scheduler.get_last_lr()[0]:.2e}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 10, generator=g)
    y = torch.sin(x[:, :3].sum(1, keepdim=True))
    loader = DataLoader(TensorDataset(x, y), batch_size=Config.batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    model = nn.Sequential(nn.Linear(10, 64), nn.Tanh(), nn.Linear(64, 1))
    Trainer(model, loader, Config()).fit()


if __name__ == "__main__":
    main()
