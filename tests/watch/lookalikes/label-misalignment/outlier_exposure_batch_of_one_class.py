"""Outlier exposure: the loader holds only normal samples, each with label 0, and the loop adds as
many synthetic outliers labelled 1 before the loss. Every batch from the loader is one class, but
the loss sees both: the labels are not broken."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    normal = torch.randn(2048, 8, generator=g) * 0.5
    loader = DataLoader(TensorDataset(normal, torch.zeros(2048)), batch_size=32, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        for x, y in loader:
            outliers = torch.rand(len(x), 8, generator=g) * 6 - 3
            inputs = torch.cat([x, outliers])
            targets = torch.cat([y, torch.ones(len(x))])
            loss = criterion(model(inputs).squeeze(1), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
