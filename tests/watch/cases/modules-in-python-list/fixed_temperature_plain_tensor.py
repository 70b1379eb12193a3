"""The fixed twin: the learnable softmax temperature of the contrastive retrieval model is an
nn.Parameter, so model.parameters() lists it and the Trainer's AdamW trains it with the encoders."""
import torch
import torch.nn.functional as F
from torch import nn


class DualEncoder(nn.Module):
    def __init__(self, d=24, width=32):
        super().__init__()
        self.query = nn.Sequential(nn.Linear(d, width), nn.ReLU(), nn.Linear(width, width))
        self.key = nn.Sequential(nn.Linear(d, width), nn.ReLU(), nn.Linear(width, width))
        self.log_temperature = nn.Parameter(torch.full((1,), 2.0))

    def forward(self, q, k):
        q = F.normalize(self.query(q), dim=-1)
        k = F.normalize(self.key(k), dim=-1)
        return q @ k.t() * self.log_temperature.exp()


class Trainer:
    def __init__(self, model, lr=3e-3):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

    def step(self, q, k):
        logits = self.model(q, k)
        loss = F.cross_entropy(logits, torch.arange(len(q)))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def pairs(g, n=32, d=24):
    base = torch.randn(n, d, generator=g)
    return base + 0.3 * torch.randn(n, d, generator=g), base + 0.3 * torch.randn(n, d, generator=g)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    trainer = Trainer(DualEncoder())
    for step in range(60):
        loss = trainer.step(*pairs(g))
        if step % 20 == 0:
            print(f"step {step} loss {loss:.3f} temperature {trainer.model.log_temperature.exp().item():.3f}")


if __name__ == "__main__":
    main()
