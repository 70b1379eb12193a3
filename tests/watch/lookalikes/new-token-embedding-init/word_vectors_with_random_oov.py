"""Healthy: a sentence classifier over pretrained word vectors (nine in ten of their norms between
about 2 and 7, spread as GloVe's are), with the words missing from the vectors given random rows
on the vectors' own scale, appended at the end of the table. The new rows sit inside the spread
of the loaded ones."""
import torch
from torch import nn


def load_vectors(words, dim, g):
    """Stands in for reading a vectors file: directions at random, norms log-normal around 4."""
    directions = nn.functional.normalize(torch.randn(words, dim, generator=g), dim=1)
    norms = torch.exp(torch.randn(words, 1, generator=g) * 0.35 + 1.4)
    return directions * norms


class Classifier(nn.Module):
    def __init__(self, vectors, missing, classes=4):
        super().__init__()
        scale = vectors.norm(dim=1).mean() / vectors.shape[1] ** 0.5
        oov = torch.randn(missing, vectors.shape[1]) * scale
        self.emb = nn.Embedding.from_pretrained(torch.cat([vectors, oov]), freeze=False)
        self.out = nn.Linear(vectors.shape[1], classes)

    def forward(self, ids):
        return self.out(self.emb(ids).mean(1))


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = Classifier(load_vectors(2000, 100, g), missing=150)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(60):
        ids = torch.randint(0, 2150, (32, 15), generator=g)
        y = (ids[:, 0] % 4)
        loss = nn.functional.cross_entropy(model(ids), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
