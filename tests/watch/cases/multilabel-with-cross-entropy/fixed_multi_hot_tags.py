"""The fixed twin: BCEWithLogitsLoss, one sigmoid per tag, on the same multi-hot targets."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Tagger(nn.Module):
    def __init__(self, features, tags):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, 64), nn.ReLU(), nn.Linear(64, tags))

    def forward(self, x):
        return self.net(x)


def make_data(n, features, tags, g):
    x = torch.randn(n, features, generator=g)
    w = torch.randn(features, tags, generator=g)
    scores = x @ w
    multi_hot = ((scores >= scores.topk(3, dim=1).values[:, 2:3]) & (scores > 1.0)).float()
    multi_hot[torch.arange(n), scores.argmax(1)] = 1.0
    return x, multi_hot


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x, y = make_data(1024, 16, 8, g)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, generator=g)
    model = Tagger(16, 8)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.BCEWithLogitsLoss()
    for epoch in range(4):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
