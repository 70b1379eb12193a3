"""A small GAN on a 2-D ring of Gaussians, trained generator first as PyTorch-GAN's scripts do,
with Adam and betas (0.5, 0.999), the discriminator at 4e-3 and the generator at 1e-4: the
discriminator soon tells the samples apart, so the generator's loss (the first loss of each
iteration) rises several-fold over the first steps. The generator's weights move by a small
fraction of their size per step: a rising loss here is the game, not the step size."""
import math

import torch
from torch import nn


def ring(n, g):
    k = torch.randint(0, 8, (n,), generator=g).float()
    centres = torch.stack([torch.cos(k * math.pi / 4), torch.sin(k * math.pi / 4)], 1) * 2
    return centres + 0.05 * torch.randn(n, 2, generator=g)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    gen = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
    disc = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=4e-3, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    ones, zeros = torch.ones(64, 1), torch.zeros(64, 1)
    first = None
    for step in range(60):
        real, z = ring(64, g), torch.randn(64, 8, generator=g)
        fake = gen(z)
        loss_g = bce(disc(fake), ones)
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        first = loss_g.item() if first is None else first
        loss_d = bce(disc(real), ones) + bce(disc(fake.detach()), zeros)
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
    print(f"generator loss {first:.3f} -> {loss_g.item():.3f}; discriminator loss {loss_d.item():.3f}")


if __name__ == "__main__":
    main()
