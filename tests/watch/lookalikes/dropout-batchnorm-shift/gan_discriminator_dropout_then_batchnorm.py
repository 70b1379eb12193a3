"""Healthy look-alike of dropout-batchnorm-shift: a GAN whose discriminator blocks run Conv, LeakyReLU,
Dropout2d and then BatchNorm2d, a common discriminator recipe. The discriminator is only ever run in
training mode (it scores real and generated batches for the two losses and is never evaluated), so
the variance its BatchNorm records with dropout on is the variance it sees: there is no train/eval
shift to suffer from. The generator also draws a grid of samples now and then, in training mode,
for a picture."""
import torch
import torch.nn.functional as F
from torch import nn


def d_block(cin, cout, bn=True):
    layers = [nn.Conv2d(cin, cout, 3, 2, 1), nn.LeakyReLU(0.2), nn.Dropout2d(0.25)]
    return layers + ([nn.BatchNorm2d(cout)] if bn else [])


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*d_block(1, 16, bn=False), *d_block(16, 32), *d_block(32, 64))
        self.head = nn.Linear(64 * 2 * 2, 1)

    def forward(self, img):
        return self.head(self.blocks(img).flatten(1))


class Generator(nn.Module):
    def __init__(self, latent=16):
        super().__init__()
        self.fc = nn.Linear(latent, 32 * 4 * 4)
        self.up = nn.Sequential(nn.BatchNorm2d(32), nn.Upsample(scale_factor=2), nn.Conv2d(32, 16, 3, 1, 1),
                                nn.BatchNorm2d(16), nn.ReLU(), nn.Upsample(scale_factor=2), nn.Conv2d(16, 1, 3, 1, 1),
                                nn.Tanh())

    def forward(self, z):
        return self.up(self.fc(z).view(-1, 32, 4, 4))


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    generator, discriminator = Generator(), Discriminator()
    opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    fixed_z = torch.randn(16, 16, generator=g)
    for step in range(60):
        real = torch.tanh(torch.randn(32, 1, 16, 16, generator=g))
        fake = generator(torch.randn(32, 16, generator=g))
        g_loss = F.binary_cross_entropy_with_logits(discriminator(fake), torch.ones(32, 1))
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        d_loss = (F.binary_cross_entropy_with_logits(discriminator(real), torch.ones(32, 1))
                  + F.binary_cross_entropy_with_logits(discriminator(fake.detach()), torch.zeros(32, 1))) / 2
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        if step % 10 == 0:
            grid = generator(fixed_z)  # samples for a picture
            print(f"step {step} d_loss {d_loss.item():.3f} g_loss {g_loss.item():.3f} sample mean {grid.mean().item():.3f}")


if __name__ == "__main__":
    main()
