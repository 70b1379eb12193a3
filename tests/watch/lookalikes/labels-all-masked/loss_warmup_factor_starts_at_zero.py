"""A classifier whose loss is ramped in by a warm-up factor, step / WARMUP, capped at 1: the very
first backward() runs on the loss times 0.0 and every later one on a real loss. A factor that
starts at zero is a ramp, not a batch with no labels."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

WARMUP = 10


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 20, generator=g)
    y = (x[:, :4].sum(1) > 0).long() + (x[:, 4] > 1).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = 0
    for epoch in range(2):
        for xb, yb in loader:
            ramp = min(1.0, step / WARMUP)
            loss = ramp * F.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
