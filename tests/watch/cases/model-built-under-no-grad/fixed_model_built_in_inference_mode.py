"""The fixed twin: the model is built outside, and only the dry forward pass runs under torch.no_grad()."""
import torch
from torch import nn


def setup(features, classes):
    model = nn.Sequential(nn.Linear(features, 32), nn.ReLU(), nn.Linear(32, classes))
    with torch.no_grad():
        assert model(torch.zeros(2, features)).shape == (2, classes)
    return model


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (512,), generator=g)
    x = torch.randn(512, 8, generator=g) + nn.functional.one_hot(y, 8).float()
    model = setup(8, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(30):
        idx = torch.randint(0, 512, (32,), generator=g)
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
