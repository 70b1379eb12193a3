"""A small GAN with two Adam optimizers, each stepped in its own update function; the fix: the
generator stays float32 (its forward runs under float16 autocast), so its Adam state is float32."""
import torch
from torch import nn


def discriminator_step(gen, disc, opt_d, real, z, bce):
    opt_d.zero_grad()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
        fake = gen(z).float()
    ones, zeros = torch.ones(len(real), 1), torch.zeros(len(real), 1)
    loss = bce(disc(real), ones) + bce(disc(fake), zeros)
    loss.backward()
    opt_d.step()
    return loss.item()


def generator_step(gen, disc, opt_g, z, bce):
    opt_g.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        fake = gen(z)
    loss = bce(disc(fake.float()), torch.ones(len(z), 1))
    loss.backward()
    opt_g.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    gen = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
    disc = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    for it in range(60):
        real = torch.randn(64, 2, generator=g) * 0.5 + torch.tensor([2.0, -1.0])
        z = torch.randn(64, 8, generator=g)
        d_loss = discriminator_step(gen, disc, opt_d, real, z, bce)
        g_loss = generator_step(gen, disc, opt_g, z, bce)
    print(f"d {d_loss:.3f} g {g_loss:.3f}")


if __name__ == "__main__":
    main()
