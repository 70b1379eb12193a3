"""Healthy look-alike of train-shuffle-off: a reproducible training run whose DataLoader shuffles
with a torch.Generator seeded once, when the loader is built. The generator's state moves on with
every epoch, so each epoch draws a new order (the same orders on every rerun of the script): the
epochs do not repeat their order, they are only reproducible."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1024, 10, generator=g)
    y = (x[:, :3].sum(dim=1) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(1234))
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
