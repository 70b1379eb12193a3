"""A Trainer class with a LambdaLR warmup; the fix: training_step() ticks the scheduler after
optimizer.step(), so every step uses its own value of the warmup, starting with the first."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, lr=1e-3, warmup=20):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: min(1.0, (step + 1) / warmup))
        self.loss_fn = nn.CrossEntropyLoss()

    def training_step(self, x, y):
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        return loss.item()

    def fit(self, loader, epochs):
        self.model.train()
        for _ in range(epochs):
            for x, y in loader:
                loss = self.training_step(x, y)
        return loss


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 16, generator=g)
    y = (x[:, :4].sum(1) > 0).long() + (x[:, 4] > 1).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 3))
    loss = Trainer(model).fit(loader, epochs=4)
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
