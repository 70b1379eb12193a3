"""A contrastive embedding trained through helper functions that receive the model: the pair
distance is sqrt(sum((a - b)**2) + eps), whose derivative stays finite when a positive pair is
the same sample twice and the distance is 0."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def embed_pairs(model, left, right):
    return model(left), model(right)


def pair_distance(a, b):
    return (((a - b) ** 2).sum(-1) + 1e-12).sqrt()


def contrastive_loss(distance, same, margin=1.0):
    return (same * distance ** 2 + (1 - same) * torch.clamp(margin - distance, min=0) ** 2).mean()


def train_epoch(model, optimizer, loader):
    for left, right, same in loader:
        a, b = embed_pairs(model, left, right)
        loss = contrastive_loss(pair_distance(a, b), same)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def make_pairs(n=512, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    partner = torch.randint(0, n, (n,), generator=g)
    same = (torch.rand(n, generator=g) < 0.25).float()
    right = torch.where(same[:, None].bool(), x, x[partner])  # a positive pair: the sample with itself
    return TensorDataset(x, right, same)


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(make_pairs(), batch_size=64, shuffle=True)
    for epoch in range(6):
        loss = train_epoch(model, optimizer, loader)
    print(f"loss {loss}")


if __name__ == "__main__":
    main()
