"""Healthy: before backward() the trainer gathers its metrics with torch.tensor([loss, accuracy]) and
torch.tensor([loss.item(), accuracy]) and sums them as an all_reduce over ranks would, for logging
only; the loss that backward() runs on is the cross-entropy itself plus a weight penalty."""
import torch
import torch.nn.functional as F
from torch import nn


class Trainer:
    def __init__(self, model, lr=0.05, decay=1e-4):
        self.model, self.decay = model, decay
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.totals = torch.zeros(2)

    def reduce_metrics(self, loss, logits, y):
        accuracy = (logits.argmax(1) == y).float().mean()
        shards = [torch.tensor([loss, accuracy]), torch.tensor([loss.item(), accuracy.item()])]
        return torch.stack(shards).sum(0) / len(shards)

    def step(self, x, y):
        logits = self.model(x)
        loss = F.cross_entropy(logits, y)
        self.totals += self.reduce_metrics(loss, logits, y)
        total = loss + self.decay * sum(p.pow(2).sum() for p in self.model.parameters())
        self.optimizer.zero_grad()
        total.backward()
        self.optimizer.step()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 10, generator=g)
    y = (x[:, :4] * 2).argmax(1)
    trainer = Trainer(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4)))
    for epoch in range(3):
        trainer.totals.zero_()
        for i in range(0, 640, 32):
            trainer.step(x[i:i + 32], y[i:i + 32])
        loss, acc = (trainer.totals / 20).tolist()
        print(f"epoch {epoch} loss {loss:.3f} acc {acc:.3f}")


if __name__ == "__main__":
    main()
