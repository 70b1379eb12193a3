"""Healthy for this check: an MLP on raw 0-255 pixel values with PyTorch's default init. The first
layer's output is large because the inputs are (input-scale's concern, not a layer's gain), and
from there each default-initialised layer keeps or shrinks the scale: nothing grows with depth."""
import torch
from torch import nn


def main():
    torch.manual_seed(0)
    x = torch.randint(0, 256, (512, 64)).float()
    y = (x[:, :32].mean(1) > x[:, 32:].mean(1)).long()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for _ in range(60):
        idx = torch.randint(0, 512, (64,))
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
