"""A DCGAN-style discriminator update on vectors: the real half and the fake half of the batch each
get their own BCE loss (a mean) and their own backward() before one optimizer step, as the PyTorch
DCGAN example writes it. Two backward() calls add two different losses' gradients: that is the
gradient of their sum, not a window of micro-batches of one loss."""
import torch
from torch import nn

DIM, NOISE = 16, 8


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    netG = nn.Sequential(nn.Linear(NOISE, 32), nn.ReLU(), nn.Linear(32, DIM))
    netD = nn.Sequential(nn.Linear(DIM, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1), nn.Sigmoid())
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    criterion = nn.BCELoss()
    center = torch.randn(DIM, generator=g)
    for step in range(120):
        real = center + 0.3 * torch.randn(32, DIM, generator=g)
        netD.zero_grad()
        errD_real = criterion(netD(real).squeeze(1), torch.ones(32))
        errD_real.backward()
        fake = netG(torch.randn(32, NOISE, generator=g))
        errD_fake = criterion(netD(fake.detach()).squeeze(1), torch.zeros(32))
        errD_fake.backward()
        optD.step()
        netG.zero_grad()
        errG = criterion(netD(fake).squeeze(1), torch.ones(32))
        errG.backward()
        optG.step()
        if step % 40 == 0:
            print(f"step {step} D {errD_real.item() + errD_fake.item():.3f} G {errG.item():.3f}")


if __name__ == "__main__":
    main()
