"""A tagger with a coarse head and a fine head over one encoder. A LossComputer class returns
cross-entropy on both heads plus a consistency penalty weighted by 0.5: the probability mass the
fine head puts outside the fine tags of the coarse head's distribution (the expected share of
inconsistent pairs, from softmaxes), which carries gradient into both heads. A fit() function takes
the model and the optimizer and logs every part."""
import torch
import torch.nn.functional as F
from torch import nn

COARSE, FINE_PER = 3, 4
FINE = COARSE * FINE_PER


class Tagger(nn.Module):
    def __init__(self, dim=24):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, dim), nn.ReLU(), nn.Linear(dim, dim), nn.ReLU())
        self.coarse = nn.Linear(dim, COARSE)
        self.fine = nn.Linear(dim, FINE)

    def forward(self, x):
        h = self.encoder(x)
        return self.coarse(h), self.fine(h)


class LossComputer:
    def __init__(self, weight=0.5):
        self.weight = weight
        self.parent = torch.arange(FINE) // FINE_PER  # the coarse tag of each fine tag

    def __call__(self, outputs, coarse_y, fine_y):
        coarse_logits, fine_logits = outputs
        ce = F.cross_entropy(coarse_logits, coarse_y) + F.cross_entropy(fine_logits, fine_y)
        fine_p, coarse_p = fine_logits.softmax(1), coarse_logits.softmax(1)
        consistent = (fine_p * coarse_p[:, self.parent]).sum(1)  # P(fine tag's parent == coarse tag)
        penalty = (1 - consistent).mean()
        return ce + self.weight * penalty, {"ce": ce.item(), "penalty": penalty.item()}


def fit(model, optimizer, compute_loss, x, fine_y, steps=60):
    g = torch.Generator().manual_seed(1)
    for step in range(steps):
        rows = torch.randint(0, len(x), (32,), generator=g)
        loss, parts = compute_loss(model(x[rows]), fine_y[rows] // FINE_PER, fine_y[rows])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(step, round(loss.item(), 4), parts)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    fine_y = torch.randint(0, FINE, (400,), generator=g)
    x = torch.randn(400, 16, generator=g) + torch.randn(FINE, 16, generator=g)[fine_y]
    model = Tagger()
    fit(model, torch.optim.Adam(model.parameters(), lr=3e-3), LossComputer(), x, fine_y)


if __name__ == "__main__":
    main()
