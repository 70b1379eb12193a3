"""A setup() helper that builds the model and runs a dry forward pass to check its output shape,
all inside torch.inference_mode() "to save memory": every parameter is created as an inference
tensor, so the first training step fails with "Inference tensors cannot be saved for backward"."""
import torch
from torch import nn


def setup(features, classes):
    with torch.inference_mode():
        model = nn.Sequential(nn.Linear(features, 32), nn.ReLU(), nn.Linear(32, classes))
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
