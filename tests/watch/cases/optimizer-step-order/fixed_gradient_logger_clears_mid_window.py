"""A text classifier trained with gradient accumulation (4 micro-batches per step) in a
train_epoch(model, optimizer, loader, logger) helper; every few micro-batches the helper hands the
model to a GradLogger whose log() records each layer's gradient norm and leaves the
gradients as they are, so every accumulation window of 4 micro-batches reaches its step whole."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ACCUMULATION = 4


class BagOfWords(nn.Module):
    def __init__(self, vocab=200, dim=32, classes=4):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dim)
        self.head = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, classes))

    def forward(self, tokens):
        return self.head(self.embed(tokens))


class GradLogger:
    def __init__(self, every=3):
        self.every, self.records = every, []

    def log(self, model, step):
        norms = {name: p.grad.norm().item() for name, p in model.named_parameters() if p.grad is not None}
        self.records.append((step, sum(norms.values())))


def train_epoch(model, optimizer, loader, logger, seen):
    for i, (tokens, labels) in enumerate(loader):
        loss = F.cross_entropy(model(tokens), labels) / ACCUMULATION
        loss.backward()
        seen += 1
        if seen % logger.every == 0:
            logger.log(model, seen)
        if seen % ACCUMULATION == 0:
            optimizer.step()
            optimizer.zero_grad()
    return seen, loss.item() * ACCUMULATION


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 4, (512,), generator=g)
    tokens = torch.randint(0, 200, (512, 12), generator=g)
    tokens[:, :4] = labels[:, None] * 50 + torch.randint(0, 50, (512, 4), generator=g)   # class words
    loader = DataLoader(TensorDataset(tokens, labels), batch_size=16, shuffle=True, generator=g)
    model = BagOfWords()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    logger, seen = GradLogger(), 0
    for epoch in range(8):
        seen, loss = train_epoch(model, optimizer, loader, logger, seen)
        print(f"epoch {epoch} loss {loss:.4f}")


if __name__ == "__main__":
    main()
