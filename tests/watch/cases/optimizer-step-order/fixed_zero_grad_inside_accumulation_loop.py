"""A trainer with gradient accumulation (accumulation_steps=4 micro-batches of 8 for an effective
batch of 32): train_epoch() runs forward, loss / accumulation_steps and backward for every
micro-batch, and every fourth one calls optimizer.step() and then optimizer.zero_grad(), so each
update applies the gradient of all four."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, accumulation_steps=4, lr=0.05):
        self.model, self.accumulation_steps = model, accumulation_steps
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    def train_epoch(self, loader):
        self.model.train()
        for i, (x, y) in enumerate(loader):
            loss = F.cross_entropy(self.model(x), y) / self.accumulation_steps
            loss.backward()
            if (i + 1) % self.accumulation_steps == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()
        return loss.item() * self.accumulation_steps


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1600, 16, generator=g)
    y = x[:, :3].argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True, generator=g)
    trainer = Trainer(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 3)))
    for epoch in range(2):
        print(f"epoch {epoch} loss {trainer.train_epoch(loader):.4f}")


if __name__ == "__main__":
    main()
