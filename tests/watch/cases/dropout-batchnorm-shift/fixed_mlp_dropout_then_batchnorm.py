"""The fixed twin: Linear -> BatchNorm1d -> ReLU -> Dropout, the dropout after the normalisation."""
import torch
from torch import nn


def block(i, o):
    return nn.Sequential(nn.Linear(i, o), nn.BatchNorm1d(o), nn.ReLU(), nn.Dropout(0.5))


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (2048,), generator=g)
    x = torch.randn(2048, 12, generator=g) + nn.functional.one_hot(y, 12).float()
    model = nn.Sequential(block(12, 64), block(64, 64), nn.Linear(64, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(60):
        model.train()
        idx = torch.randint(0, 2048, (64,), generator=g)
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        accuracy = (model(x).argmax(1) == y).float().mean()
    print(f"loss {loss.item():.3f} accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
