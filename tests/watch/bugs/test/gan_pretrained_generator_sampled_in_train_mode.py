"""A notebook that trains and ships a small DCGAN: a Generator (ConvTranspose2d + BatchNorm2d +
ReLU, Tanh output) and a Discriminator (Conv2d + LeakyReLU, sigmoid output) trained with BCELoss
and two Adam optimizers in the usual alternating loop (netD on real and detached fake, then netG
against "real" labels), the generator's state_dict saved as the pretrained weights; a second
section loads those weights into a fresh Generator and samples images from noise, one
batch for a grid and single samples for individual use.
The bug: the sampling section never calls G.eval() after load_state_dict, so BatchNorm normalises
with the statistics of whatever batch it is given instead of its running averages: the same noise
vector gives a different image depending on the batch it is generated in, and a single sample
(batch of one) is normalised by its own statistics and comes out as something else entirely.

Thread: https://github.com/csinva/gan-vae-pretrained-pytorch/issues/2
"""
import io

import torch
from torch import nn

NZ, NGF, NDF, IMG = 16, 16, 16, 16


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(NZ, NGF * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(NGF * 2), nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF), nn.ReLU(True),
            nn.ConvTranspose2d(NGF, 1, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, NDF, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
            nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
            nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())

    def forward(self, x):
        return self.main(x).view(-1)


def weights_init(m):
    if "Conv" in type(m).__name__:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif "BatchNorm" in type(m).__name__:
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


def real_images(n, g):
    """Bright rings of random radius on a dark background, in [-1, 1]."""
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, IMG), torch.linspace(-1, 1, IMG), indexing="ij")
    r = torch.sqrt(yy ** 2 + xx ** 2)
    radius = 0.3 + 0.4 * torch.rand(n, 1, 1, 1, generator=g)
    return (2 * torch.exp(-((r - radius) ** 2) / 0.02) - 1).clamp(-1, 1)


def train_gan(num_iters=120, batch_size=32):
    g = torch.Generator().manual_seed(0)
    netG, netD = Generator(), Discriminator()
    netG.apply(weights_init)
    netD.apply(weights_init)
    criterion = nn.BCELoss()
    optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
    for it in range(num_iters):
        real = real_images(batch_size, g)
        netD.zero_grad()
        errD_real = criterion(netD(real), torch.ones(batch_size))
        errD_real.backward()
        fake = netG(torch.randn(batch_size, NZ, 1, 1, generator=g))
        errD_fake = criterion(netD(fake.detach()), torch.zeros(batch_size))
        errD_fake.backward()
        optimizerD.step()
        netG.zero_grad()
        errG = criterion(netD(fake), torch.ones(batch_size))
        errG.backward()
        optimizerG.step()
        if it % 30 == 0:
            print(f"[{it}/{num_iters}] Loss_D {(errD_real + errD_fake).item():.4f} Loss_G {errG.item():.4f}")
    buf = io.BytesIO()
    torch.save(netG.state_dict(), buf)
    buf.seek(0)
    return buf


def ring_score(imgs):
    """Fraction of bright pixels: real rings cover roughly 20-35% of the image."""
    return (imgs > 0).float().mean().item()


def main():
    torch.manual_seed(0)
    weights = train_gan()

    # --- use the pretrained generator ---
    G = Generator()
    G.load_state_dict(torch.load(weights))
    g = torch.Generator().manual_seed(7)
    noise = torch.randn(64, NZ, 1, 1, generator=g)
    with torch.no_grad():
        grid = G(noise)
        grid_half = G(noise[:8])
        singles = torch.cat([G(noise[i:i + 1]) for i in range(8)])
    print(f"grid of 64: bright fraction {ring_score(grid):.3f}")
    print(f"first 8 generated alone vs in the grid: max pixel difference "
          f"{(grid_half - grid[:8]).abs().max().item():.3f}")
    print(f"one at a time: bright fraction {ring_score(singles):.3f}, "
          f"max pixel difference to grid {(singles - grid[:8]).abs().max().item():.3f}")
    print(f"real images: bright fraction {ring_score(real_images(64, g)):.3f}")


if __name__ == "__main__":
    main()
