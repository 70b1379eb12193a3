"""Healthy look-alike of loss-detached-from-graph: a latent denoiser trained jointly with its encoder
adds detached noise to the latent, noisy = z + sigma * eps, and takes the regression target back as
(noisy - z) / sigma: that target is (z + c) - z, whose gradient cancels exactly, but the prediction
side of the same loss reaches the denoiser and the encoder, so the term trains. A straight-through
rounding x + (round(x) - x).detach() feeds the decoder as well."""
import torch
import torch.nn.functional as F
from torch import nn


class LatentDenoiser(nn.Module):
    def __init__(self, d=16, dim=8):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, dim))
        self.denoiser = nn.Sequential(nn.Linear(dim + 1, 32), nn.ReLU(), nn.Linear(32, dim))
        self.decoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, d))


def train_step(model, optimizer, x, g):
    z = model.encoder(x)
    sigma = 0.1 + 0.9 * torch.rand(len(x), 1, generator=g)
    noisy = z + sigma * torch.randn(z.shape, generator=g)
    target = (noisy - z) / sigma
    pred = model.denoiser(torch.cat([noisy, sigma], dim=1))
    rounded = z + (torch.round(z * 4) / 4 - z).detach()
    loss = F.mse_loss(pred, target) + F.mse_loss(model.decoder(rounded), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = LatentDenoiser()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for step in range(60):
        loss = train_step(model, optimizer, torch.randn(64, 16, generator=g), g)
        if step % 20 == 0:
            print(f"step {step} loss {loss:.4f}")


if __name__ == "__main__":
    main()
