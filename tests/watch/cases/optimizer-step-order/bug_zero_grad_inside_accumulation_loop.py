"""A trainer with gradient accumulation (accumulation_steps=4 micro-batches of 8 for an effective
batch of 32): train_epoch() calls optimizer.zero_grad() at the top of every micro-batch, then
forward and loss / accumulation_steps and backward, and steps every fourth micro-batch. Each
zero_grad() wipes what the micro-batches before it accumulated, so every update is the gradient of
one micro-batch scaled down by four: the run behaves like batch 8 at a quarter of the learning
rate."""
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
            self.optimizer.zero_grad()
            loss = F.cross_entropy(self.model(x), y) / self.accumulation_steps
            loss.backward()
            if (i + 1) % self.accumulation_steps == 0:
                self.optimizer.step()
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
