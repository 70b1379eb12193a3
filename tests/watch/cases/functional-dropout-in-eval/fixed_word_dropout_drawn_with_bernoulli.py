"""A bag-of-embeddings text classifier with word dropout: forward() replaces each token by UNK with
probability WORD_DROP, the mask drawn with torch.bernoulli over a tensor filled with that
probability, in training mode only: the validation pass under model.eval() and no_grad reads every
word."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, UNK, PAD, WORD_DROP = 200, 1, 0, 0.1


class BagClassifier(nn.Module):
    def __init__(self, dim=32, classes=3):
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, dim, mode="mean", padding_idx=PAD)
        self.out = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, classes))

    def forward(self, ids):
        if self.training:
            drop = torch.bernoulli(torch.full(ids.shape, WORD_DROP, device=ids.device)).bool() & (ids != PAD)
            ids = ids.masked_fill(drop, UNK)
        return self.out(self.embed(ids))


def make_data(n, g):
    ids = torch.randint(2, VOCAB, (n, 16), generator=g)
    labels = (ids[:, :4] < 70).sum(1).clamp(max=2)
    return ids, labels


def validate(model, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for ids, y in loader:
            correct += (model(ids).argmax(1) == y).sum().item()
    model.train()
    return correct / len(loader.dataset)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    ids, labels = make_data(1500, g)
    train = DataLoader(TensorDataset(ids[:1200], labels[:1200]), batch_size=32, shuffle=True, generator=g)
    val = DataLoader(TensorDataset(ids[1200:], labels[1200:]), batch_size=100)
    model = BagClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(2):
        for xb, yb in train:
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} val acc {validate(model, val):.3f}")


if __name__ == "__main__":
    main()
