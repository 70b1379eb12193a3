"""Healthy look-alike of optimizer-step-order: gradient accumulation. backward() runs on every
micro-batch and the gradients add up on purpose; step() and zero_grad() run every 4 micro-batches."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class AccumulatingTrainer:
    def __init__(self, model, accumulate=4, lr=1e-3):
        self.model, self.accumulate = model, accumulate
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        self.criterion = nn.CrossEntropyLoss()

    def fit(self, loader, epochs):
        self.optimizer.zero_grad()
        for epoch in range(epochs):
            for i, (x, y) in enumerate(loader):
                loss = self.criterion(self.model(x), y) / self.accumulate
                loss.backward()
                if (i + 1) % self.accumulate == 0:
                    nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                    self.optimizer.step()
                    self.optimizer.zero_grad()
        return loss.item() * self.accumulate


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 10, generator=g)
    y = (x[:, 0] * x[:, 1] > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 2))
    print(f"loss {AccumulatingTrainer(model).fit(loader, epochs=4):.3f}")


if __name__ == "__main__":
    main()
