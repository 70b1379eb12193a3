"""A GAN with two optimizers, each over its own network: the generator's over generator.parameters(),
the discriminator's over discriminator.parameters()."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Generator(nn.Module):
    def __init__(self, noise=8, features=2):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(noise, 32), nn.ReLU(), nn.Linear(32, features))

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self, features=2):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


class GANTrainer:
    def __init__(self, generator, discriminator, lr=2e-4):
        self.generator, self.discriminator = generator, discriminator
        self.opt_g = torch.optim.Adam(generator.parameters(), lr=lr, betas=(0.5, 0.999))
        self.opt_d = torch.optim.Adam(discriminator.parameters(), lr=lr, betas=(0.5, 0.999))
        self.criterion = nn.BCEWithLogitsLoss()

    def discriminator_step(self, real, z):
        self.opt_d.zero_grad()
        fake = self.generator(z).detach()
        loss = self.criterion(self.discriminator(real), torch.ones(len(real))) + \
            self.criterion(self.discriminator(fake), torch.zeros(len(fake)))
        loss.backward()
        self.opt_d.step()
        return loss.item()

    def generator_step(self, z):
        self.opt_g.zero_grad()
        loss = self.criterion(self.discriminator(self.generator(z)), torch.ones(len(z)))
        loss.backward()
        self.opt_g.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    angle = torch.rand(1024, generator=g) * 6.2832
    real = torch.stack([angle.cos(), angle.sin()], 1) + 0.05 * torch.randn(1024, 2, generator=g)
    loader = DataLoader(TensorDataset(real), batch_size=64, shuffle=True, generator=g)
    trainer = GANTrainer(Generator(), Discriminator())
    for epoch in range(4):
        for (batch,) in loader:
            z = torch.randn(len(batch), 8)
            d_loss = trainer.discriminator_step(batch, z)
            g_loss = trainer.generator_step(z)
    print(f"d loss {d_loss:.3f}, g loss {g_loss:.3f}")


if __name__ == "__main__":
    main()
