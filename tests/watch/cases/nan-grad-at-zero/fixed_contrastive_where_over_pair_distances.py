"""A contrastive embedding trainer: a ContrastiveLoss module takes the batch's pairwise Euclidean
distances as sqrt of summed squared differences plus a small epsilon inside the root, over every
pair (the diagonal included), and picks per pair with torch.where: the distance itself for pairs
of one class, a hinge max(0, margin - d) for the others. With the epsilon the root is never taken
at 0 and every gradient stays finite."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class ContrastiveLoss(nn.Module):
    def __init__(self, margin=1.0):
        super().__init__()
        self.margin = margin

    def forward(self, emb, labels):
        diff = emb[:, None, :] - emb[None, :, :]
        dist = torch.sqrt((diff ** 2).sum(-1) + 1e-12)
        same = labels[:, None] == labels[None, :]
        per_pair = torch.where(same, dist, F.relu(self.margin - dist))
        return per_pair.mean()


class Trainer:
    def __init__(self, model, loader, lr=1e-2):
        self.model, self.loader = model, loader
        self.criterion = ContrastiveLoss()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    def fit(self, epochs):
        for epoch in range(epochs):
            for x, y in self.loader:
                loss = self.criterion(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    centers = torch.randn(4, 16, generator=g) * 3
    y = torch.randint(0, 4, (768,), generator=g)
    x = centers[y] + torch.randn(768, 16, generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 8))
    Trainer(model, loader).fit(epochs=3)


if __name__ == "__main__":
    main()
