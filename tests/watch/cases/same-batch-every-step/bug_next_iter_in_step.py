"""A step-budget training loop: Trainer.train_step draws its batch with next(iter(self.loader)).
The loader does not shuffle, so every call starts a new pass and returns the same first batch:
the model memorizes 32 rows of the 640 in the dataset."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, loader):
        self.model, self.loader = model, loader
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.criterion = nn.CrossEntropyLoss()

    def train_step(self):
        x, y = next(iter(self.loader))
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
    loader = DataLoader(TensorDataset(x, y), batch_size=32)  # the data was shuffled once on disk
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3))
    trainer = Trainer(model, loader)
    for step in range(60):
        loss = trainer.train_step()
    print(f"train loss {loss:.3f}")


if __name__ == "__main__":
    main()
