"""A DCGAN-style loop over a DataLoader of 1-D signals with nn.BCELoss and a discriminator ending
in a sigmoid; the generator step negates the discriminator's own loss on the fakes,
-BCE(D(G(z)), fake_label), which is minimizing log(1 - D(G(z))): the saturating objective."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Generator(nn.Module):
    def __init__(self, nz=8, length=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(nz, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, length))

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self, length=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(length, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1), nn.Sigmoid())

    def forward(self, x):
        return self.net(x).view(-1)


def make_signals(n, length, g):
    t = torch.linspace(0, 6.28, length)
    phase = torch.rand(n, 1, generator=g) * 6.28
    return torch.sin(t + phase) + 0.05 * torch.randn(n, length, generator=g)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    loader = DataLoader(TensorDataset(make_signals(2048, 32, g)), batch_size=32, shuffle=True, generator=g)
    netG, netD = Generator(), Discriminator()
    criterion = nn.BCELoss()
    optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real_label, fake_label = 1.0, 0.0
    for (real,) in loader:
        b = real.size(0)
        netD.zero_grad()
        errD_real = criterion(netD(real), torch.full((b,), real_label))
        errD_real.backward()
        fake = netG(torch.randn(b, 8))
        errD_fake = criterion(netD(fake.detach()), torch.full((b,), fake_label))
        errD_fake.backward()
        optimizerD.step()

        netG.zero_grad()
        errG = -criterion(netD(fake), torch.full((b,), fake_label))
        errG.backward()
        optimizerG.step()
    print(f"D {errD_real.item() + errD_fake.item():.3f} G {errG.item():.3f}")


if __name__ == "__main__":
    main()
