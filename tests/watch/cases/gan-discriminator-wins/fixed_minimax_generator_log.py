"""The same GANTrainer with the generator maximizing log D(G(z)) (the non-saturating loss): its
gradient stays large while the discriminator rejects the fakes."""
import torch
from torch import nn


def real_images(n, g):
    """Bright blobs on a dark background, flattened: easy for a discriminator to tell from noise."""
    yy, xx = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
    centers = torch.randint(2, 6, (n, 2), generator=g).float()
    d2 = (yy - centers[:, 0, None, None]) ** 2 + (xx - centers[:, 1, None, None]) ** 2
    return torch.exp(-d2 / 2.0).reshape(n, 64) * 2 - 1


class GANTrainer:
    def __init__(self, latent=16):
        self.latent = latent
        self.gen = nn.Sequential(nn.Linear(latent, 128), nn.ReLU(), nn.Linear(128, 64), nn.Tanh())
        self.disc = nn.Sequential(nn.Linear(64, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1), nn.Sigmoid())
        self.opt_g = torch.optim.Adam(self.gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.opt_d = torch.optim.Adam(self.disc.parameters(), lr=2e-4, betas=(0.5, 0.999))

    def train_discriminator(self, real, z):
        fake = self.gen(z).detach()
        loss = -(torch.log(self.disc(real)) + torch.log(1 - self.disc(fake))).mean()
        self.opt_d.zero_grad()
        loss.backward()
        self.opt_d.step()
        return loss.item()

    def train_generator(self, z):
        loss = -torch.log(self.disc(self.gen(z))).mean()
        self.opt_g.zero_grad()
        loss.backward()
        self.opt_g.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    trainer = GANTrainer()
    for it in range(60):
        real = real_images(64, g)
        z = torch.randn(64, trainer.latent, generator=g)
        d_loss = trainer.train_discriminator(real, z)
        g_loss = trainer.train_generator(z)
    print(f"d {d_loss:.3f} g {g_loss:.3f}")


if __name__ == "__main__":
    main()
