"""A sensor regressor converted with model.half() "for speed" (Adam's eps raised to 1e-4 for
float16, as advised) and fed raw readings of 20,000-40,000: the first layer's pre-activations
pass float16's largest value, 65504, and become inf on the first forward, so the loss is NaN
from step 0 (float16 overflow)."""
import torch
from torch import nn


def make_batch(g, n=64):
    x = torch.rand(n, 32, generator=g) * 20000 + 20000
    y = x[:, :4].mean(1) / 10000
    return x, y


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    with torch.no_grad():
        model[0].weight.abs_()
    model = model.half()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, eps=1e-4)
    for step in range(30):
        x, y = make_batch(g)
        pred = model(x.half()).squeeze(-1).float()
        loss = nn.functional.mse_loss(pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
