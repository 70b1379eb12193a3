"""Healthy look-alike of frozen-batchnorm-stats: a GAN whose discriminator (with BatchNorm) is set to
requires_grad=False only while the generator steps, as pix2pix-style trainers do, and is trained
again on the next discriminator step. Its BatchNorm layers are meant to stay in training mode."""
import torch
from torch import nn


def set_requires_grad(net, flag):
    for p in net.parameters():
        p.requires_grad = flag


def main():
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16))
    disc = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    g = torch.Generator().manual_seed(1)
    real_data = torch.randn(1024, 16, generator=g) * 0.5 + 1.0
    gen.train()
    disc.train()
    for step in range(40):
        real = real_data[(step * 32) % 1024:(step * 32) % 1024 + 32]
        fake = gen(torch.randn(32, 8))
        set_requires_grad(disc, True)
        opt_d.zero_grad()
        loss_d = bce(disc(real), torch.ones(32, 1)) + bce(disc(fake.detach()), torch.zeros(32, 1))
        loss_d.backward()
        opt_d.step()
        set_requires_grad(disc, False)  # the generator's step must not move the discriminator
        opt_g.zero_grad()
        loss_g = bce(disc(fake), torch.ones(32, 1))
        loss_g.backward()
        opt_g.step()
        if step % 10 == 0:
            print(f"step {step}: loss_d {loss_d.item():.3f} loss_g {loss_g.item():.3f}")


if __name__ == "__main__":
    main()
