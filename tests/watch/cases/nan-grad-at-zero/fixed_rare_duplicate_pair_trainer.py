"""A siamese embedding trained by a Trainer class over a pair list read in order. The distance is
(((a - b)**2).sum(-1) + 1e-12).pow(0.5): a positive pair that is one sample stored twice has a
distance of about 1e-6, and the derivative there stays finite."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

BATCH = 32
FIRST_DUPLICATE_BATCH = 13


class Trainer:
    def __init__(self, model, lr=0.05, margin=1.0):
        self.model = model
        self.margin = margin
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    def distance(self, a, b):
        return (((a - b) ** 2).sum(-1) + 1e-12).pow(0.5)

    def loss(self, left, right, same):
        d = self.distance(self.model(left), self.model(right))
        return (same * d ** 2 + (1 - same) * torch.relu(self.margin - d) ** 2).mean()

    def fit(self, loader, epochs):
        for _ in range(epochs):
            for left, right, same in loader:
                loss = self.loss(left, right, same)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        return loss.item()


def make_pairs(batches=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = batches * BATCH
    left = torch.randn(n, 12, generator=g)
    right = left + 0.3 * torch.randn(n, 12, generator=g)  # positives: a noisy view of the sample
    same = (torch.rand(n, generator=g) < 0.5).float()
    negatives = same == 0
    right[negatives] = torch.randn(int(negatives.sum()), 12, generator=g)
    for i in (FIRST_DUPLICATE_BATCH * BATCH + 5, 27 * BATCH + 3):
        right[i], same[i] = left[i], 1.0  # the same picture stored twice
    return TensorDataset(left, right, same)


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 8))
    loader = DataLoader(make_pairs(), batch_size=BATCH, shuffle=True, generator=torch.Generator().manual_seed(1))
    print(f"loss {Trainer(model).fit(loader, epochs=2)}")


if __name__ == "__main__":
    main()
