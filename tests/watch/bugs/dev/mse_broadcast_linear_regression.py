"""A plain full-batch loop fitting nn.Linear(2, 1) to a 1-D target: the prediction is (N, 1) and the
target (N,), so MSELoss broadcasts them to (N, N) and the fit converges to the wrong weights.

Thread: https://github.com/pytorch/pytorch/issues/16045
"""
import torch
from torch import nn


def main():
    g = torch.Generator().manual_seed(0)
    sample_size = 100
    x = torch.randn((sample_size, 2), generator=g)
    eps = torch.randn(sample_size, generator=g)
    y = 10 + 9 * x[:, 0] - 2 * x[:, 1] + eps
    torch.manual_seed(0)
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_func = nn.MSELoss()
    for _epoch in range(100):
        optimizer.zero_grad()
        yhat = model(x)
        loss_val = loss_func(yhat, y)
        loss_val.backward()
        optimizer.step()
    print(loss_val.item())
    print(model.weight.data, model.bias.data)


if __name__ == "__main__":
    main()
