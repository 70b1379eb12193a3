"""Healthy: a multi-task loss balanced by magnitude. The task losses are copied with torch.tensor(terms)
into inverse-magnitude weights (constants on purpose, so the weighting itself is not trained), and the
total is sum(weight * term) over the stacked terms, which keep their graph."""
import torch
import torch.nn.functional as F
from torch import nn


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(10, 48), nn.ReLU())
        self.cls, self.reg = nn.Linear(48, 3), nn.Linear(48, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.cls(h), self.reg(h).squeeze(1)


def balanced(terms):
    magnitudes = torch.tensor(terms)
    weights = magnitudes.sum() / (len(terms) * magnitudes)
    return (weights * torch.stack(terms)).sum()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 10, generator=g)
    labels, values = (x[:, :3] * 2).argmax(1), 10 * x[:, 3:6].sum(1)
    model = TwoHeads()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(3):
        for i in range(0, 640, 32):
            logits, pred = model(x[i:i + 32])
            terms = [F.cross_entropy(logits, labels[i:i + 32]), F.mse_loss(pred, values[i:i + 32])]
            loss = balanced(terms)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} cls {terms[0].item():.3f} reg {terms[1].item():.3f}")


if __name__ == "__main__":
    main()
