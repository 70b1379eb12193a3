"""A binary classifier whose loss is binary cross-entropy written out by hand on sigmoid
probabilities, log(p) for positives and log1p(-p) for negatives: log(1 - p) appears, but the loss
minimizes -log(1 - p), as any cross-entropy does, never log(1 - p) itself. Not a GAN's saturating
generator loss."""
import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x):
        return torch.sigmoid(self.body(x)).squeeze(1)


def bce(p, y, eps=1e-7):
    p = p.clamp(eps, 1 - eps)
    return -(y * torch.log(p) + (1 - y) * torch.log1p(-p)).mean()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 10, generator=g)
    y = (x[:, 0] - x[:, 1] > 0).float()
    model = Classifier()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(80):
        idx = torch.randint(0, len(x), (64,), generator=g)
        loss = bce(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
