"""Healthy look-alike of double-softmax: the trainer computes softmax probabilities for its
confidence metric, under torch.no_grad(), while the loss gets the raw logits."""
import torch
import torch.nn.functional as F
from torch import nn


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    def train_step(self, x, y):
        self.optimizer.zero_grad()
        logits = self.model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        self.optimizer.step()
        with torch.no_grad():
            confidence = F.softmax(logits, dim=1).max(1).values.mean()
        return loss.item(), confidence.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    centers = torch.randn(5, 12, generator=g) * 2
    y = torch.randint(0, 5, (640,), generator=g)
    x = centers[y] + torch.randn(640, 12, generator=g)
    trainer = Trainer(nn.Sequential(nn.Linear(12, 48), nn.ReLU(), nn.Linear(48, 5)))
    for step in range(60):
        i = (step * 64) % 640
        loss, confidence = trainer.train_step(x[i:i + 64], y[i:i + 64])
    print(f"loss {loss:.3f}, confidence {confidence:.2f}")


if __name__ == "__main__":
    main()
