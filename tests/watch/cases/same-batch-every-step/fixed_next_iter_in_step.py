"""A step-budget training loop: Trainer keeps one stream over the loader, started once, that
begins a new pass when the old one runs out, and train_step draws the next batch from it."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, loader):
        self.model, self.loader = model, loader
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.criterion = nn.CrossEntropyLoss()
        self.stream = self.batches()

    def batches(self):
        while True:
            yield from self.loader

    def train_step(self):
        x, y = next(self.stream)
        self.optimizer.zero_grad()
        loss = self.criterion(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 20, generator=g)
    y = (x[:, :4].sum(1) > 0).long() + (x[:, 4] > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(1))
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3))
    trainer = Trainer(model, loader)
    for step in range(60):
        loss = trainer.train_step()
    print(f"train loss {loss:.3f}")


if __name__ == "__main__":
    main()
