"""Healthy look-alike of targets-scaled-too-small: small regression targets (a spread of 5e-4) under
a head whose last layer is initialised at a matching small scale, trained with SGD; the loss starts
near the targets' variance and goes below it within a few steps, so the model is learning them."""
import torch
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 8, generator=g)
    y = 5e-4 * (x[:, 0] + 0.5 * x[:, 1])
    model = nn.Linear(8, 1)
    with torch.no_grad():
        model.weight.mul_(1e-3)
        model.bias.zero_()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(60):
        idx = torch.randint(0, 2048, (64,), generator=g)
        loss = nn.functional.mse_loss(model(x[idx]).squeeze(-1), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3g}")


if __name__ == "__main__":
    main()
