"""Healthy look-alike of functional-dropout-in-eval: a WordDropout module replaces a share of the
token ids by UNK with a Bernoulli mask and never reads its own training flag, but the classifier
that owns it calls it only under `if self.training:`, so evaluation sees every word. The mask is
drawn on every training step from a forward that knows nothing of the mode; its caller does."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, PAD, UNK = 300, 0, 1


class WordDropout(nn.Module):
    def __init__(self, rate):
        super().__init__()
        self.rate = rate

    def forward(self, ids):
        drop = torch.bernoulli(torch.full(ids.shape, self.rate, device=ids.device)).bool() & (ids != PAD)
        return ids.masked_fill(drop, UNK)


class BagClassifier(nn.Module):
    def __init__(self, dim=32, classes=3):
        super().__init__()
        self.word_dropout = WordDropout(0.1)
        self.embed = nn.EmbeddingBag(VOCAB, dim, mode="mean", padding_idx=PAD)
        self.out = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, classes))

    def forward(self, ids):
        if self.training:
            ids = self.word_dropout(ids)
        return self.out(self.embed(ids))


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(2, VOCAB, (1200, 16), generator=g)
    labels = torch.bucketize((ids < 100).sum(1), torch.tensor([4, 6]))
    model = BagClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(3):
        model.train()
        for i in range(0, 1024, 16):
            loss = F.cross_entropy(model(ids[i:i + 16]), labels[i:i + 16])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            acc = (model(ids[1024:]).argmax(1) == labels[1024:]).float().mean().item()
        print(f"epoch {epoch} loss {loss.item():.3f} val acc {acc:.3f}")


if __name__ == "__main__":
    main()
