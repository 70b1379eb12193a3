"""A script that sizes its classifier head as num_classes = int(labels.max()), one short of the
labels 0..5 the dataset holds: every batch holding the top class carries a target equal to the
number of outputs, which cross_entropy cannot score (on the CPU torch raises "Target 5 is out of
bounds"; on CUDA a device-side assert)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def build_model(features, num_classes):
    return nn.Sequential(nn.Linear(features, 32), nn.ReLU(), nn.Linear(32, num_classes))


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 6, (1024,), generator=g)
    x = torch.randn(1024, 12, generator=g) + nn.functional.one_hot(labels, 12).float()
    num_classes = int(labels.max())
    model = build_model(12, num_classes)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(x, labels), batch_size=32, shuffle=True, generator=g)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(2):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
