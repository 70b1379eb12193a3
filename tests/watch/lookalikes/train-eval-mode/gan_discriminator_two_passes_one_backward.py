"""Healthy look-alike of train-eval-mode: a DCGAN-style loop on vectors whose discriminator has
BatchNorm and Dropout. Each step it runs the discriminator on the real batch and on the detached
fake batch, two forwards in training mode with no backward() between them, then one backward()
of the summed loss reaches both outputs; the generator's step runs the discriminator a third time."""
import torch
import torch.nn.functional as F
from torch import nn


def discriminator():
    return nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.LeakyReLU(0.2), nn.Dropout(0.2), nn.Linear(64, 1))


def generator():
    return nn.Sequential(nn.Linear(8, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 16))


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    netD, netG = discriminator(), generator()
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    centre = torch.randn(16, generator=g)
    for step in range(60):
        real = centre + 0.5 * torch.randn(32, 16, generator=g)
        fake = netG(torch.randn(32, 8, generator=g))
        out_real, out_fake = netD(real), netD(fake.detach())
        lossD = F.binary_cross_entropy_with_logits(out_real, torch.ones_like(out_real)) + \
            F.binary_cross_entropy_with_logits(out_fake, torch.zeros_like(out_fake))
        optD.zero_grad()
        lossD.backward()
        optD.step()
        out = netD(fake)
        lossG = F.binary_cross_entropy_with_logits(out, torch.ones_like(out))
        optG.zero_grad()
        lossG.backward()
        optG.step()
        if step % 20 == 0:
            print(f"step {step} lossD {lossD.item():.3f} lossG {lossG.item():.3f}")


if __name__ == "__main__":
    main()
