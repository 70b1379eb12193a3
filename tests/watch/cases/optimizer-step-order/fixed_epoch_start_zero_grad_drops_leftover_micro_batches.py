"""A detector-style trainer with gradient accumulation: accumulate = nominal_batch // batch_size
micro-batches per optimizer step, counted with a global iteration number whose last step carries
over from one epoch to the next (ni - last_opt_step >= accumulate), and an optimizer_step() helper
that clips, steps and clears. The gradients are cleared only in that helper,
right after each step, so the micro-batches still accumulating when an epoch ends go into the first
step of the next epoch (6 batches an epoch, accumulate = 4)."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, loader, nominal_batch=64):
        self.model, self.loader = model, loader
        self.accumulate = max(1, nominal_batch // loader.batch_size)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        self.last_opt_step = -1

    def optimizer_step(self):
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=10.0)
        self.optimizer.step()
        self.optimizer.zero_grad()

    def train(self, epochs):
        nb = len(self.loader)
        for epoch in range(epochs):
            self.model.train()
            for i, (x, y) in enumerate(self.loader):
                ni = i + nb * epoch
                loss = F.cross_entropy(self.model(x), y) / self.accumulate
                loss.backward()
                if ni - self.last_opt_step >= self.accumulate:
                    self.optimizer_step()
                    self.last_opt_step = ni
            print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(20, 5, generator=g)
    x = torch.randn(96, 20, generator=g)
    y = (x @ w).argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))
    Trainer(model, loader).train(epochs=40)


if __name__ == "__main__":
    main()
