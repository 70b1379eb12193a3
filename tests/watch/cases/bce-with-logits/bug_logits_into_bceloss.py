"""A multi-label tagger whose loss helper uses F.binary_cross_entropy on the model's raw scores:
BCE wants probabilities, and torch refuses values outside [0, 1]."""
import torch
import torch.nn.functional as F
from torch import nn


class Tagger(nn.Module):
    def __init__(self, tags=5):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(20, 40), nn.ReLU())
        self.scores = nn.Linear(40, tags)

    def forward(self, x):
        return self.scores(self.encoder(x))


def multilabel_loss(scores, labels):
    return F.binary_cross_entropy(scores, labels)


def train(model, optimizer, x, labels, steps=40):
    for step in range(steps):
        i = (step * 32) % len(x)
        optimizer.zero_grad()
        loss = multilabel_loss(model(x[i:i + 32]), labels[i:i + 32])
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    x = torch.randn(320, 20)
    labels = (x[:, :5] > 0.3).float()
    model = Tagger()
    print(f"loss {train(model, torch.optim.Adam(model.parameters(), lr=1e-3), x, labels):.3f}")


if __name__ == "__main__":
    main()
