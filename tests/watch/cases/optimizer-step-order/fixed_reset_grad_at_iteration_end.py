"""A GAN trainer whose train() loop updates the generator first and the discriminator second, and
calls a reset_grad() helper that clears both networks' gradients before each network's own
backward(): the generator's loss still reaches the discriminator's parameters, but that gradient
is cleared before the discriminator's loss is back-propagated and stepped on."""
import torch
from torch import nn


class Solver:
    def __init__(self, z_dim=8, lr=1e-3):
        self.z_dim = z_dim
        self.G = nn.Sequential(nn.Linear(z_dim, 32), nn.ReLU(), nn.Linear(32, 2))
        self.D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
        self.g_optimizer = torch.optim.Adam(self.G.parameters(), lr=lr, betas=(0.5, 0.999))
        self.d_optimizer = torch.optim.Adam(self.D.parameters(), lr=lr, betas=(0.5, 0.999))
        self.criterion = nn.BCEWithLogitsLoss()

    def reset_grad(self):
        self.g_optimizer.zero_grad()
        self.d_optimizer.zero_grad()

    def train(self, data, iterations, batch_size=64):
        g = torch.Generator().manual_seed(1)
        ones, zeros = torch.ones(batch_size, 1), torch.zeros(batch_size, 1)
        for _ in range(iterations):
            real = data[torch.randint(0, len(data), (batch_size,), generator=g)]
            fake = self.G(torch.randn(batch_size, self.z_dim))
            g_loss = self.criterion(self.D(fake), ones)
            self.reset_grad()
            g_loss.backward()
            self.g_optimizer.step()

            d_loss = self.criterion(self.D(real), ones) + self.criterion(self.D(fake.detach()), zeros)
            self.reset_grad()
            d_loss.backward()
            self.d_optimizer.step()
        return g_loss.item(), d_loss.item()


def main():
    torch.manual_seed(0)
    angles = torch.rand(2048) * 6.2832
    data = torch.stack([angles.cos(), angles.sin()], 1) * 2
    print(Solver().train(data, iterations=60))


if __name__ == "__main__":
    main()
