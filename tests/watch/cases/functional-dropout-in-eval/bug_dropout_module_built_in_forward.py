"""A text classifier over averaged embeddings whose forward builds nn.Dropout(0.3) on the fly and
applies it; the new module is in training mode on every call, so the Trainer's validate() under
model.eval() still drops units."""
import torch
import torch.nn.functional as F
from torch import nn


class BagClassifier(nn.Module):
    def __init__(self, vocab=200, dim=32, classes=3):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, dim)
        self.out = nn.Linear(dim, classes)

    def forward(self, tokens):
        h = self.emb(tokens)
        return self.out(nn.Dropout(0.3)(h))


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)

    def train_step(self, tokens, labels):
        self.model.train()
        loss = F.cross_entropy(self.model(tokens), labels)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def validate(self, tokens, labels):
        self.model.eval()
        with torch.no_grad():
            return (self.model(tokens).argmax(1) == labels).float().mean().item()


def batch(g, n=32):
    tokens = torch.randint(0, 200, (n, 10), generator=g)
    return tokens, (tokens < 67).sum(1).clamp(max=2)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    trainer, val = Trainer(BagClassifier()), batch(torch.Generator().manual_seed(1), 256)
    for step in range(60):
        loss = trainer.train_step(*batch(g))
        if step % 5 == 0:
            print(f"step {step} loss {loss:.3f} val acc {trainer.validate(*val):.3f}")


if __name__ == "__main__":
    main()
