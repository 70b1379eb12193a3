"""Healthy: a small GAN whose discriminator and generator losses are separate
binary_cross_entropy_with_logits calls, each with one label for the whole batch (ones for real,
zeros for fake): every call site sees a single class, which is the game, not a prior."""
import torch
import torch.nn.functional as F
from torch import nn


def main():
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
    disc = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    for _ in range(60):
        real = torch.randn(128, 2) * 0.5 + torch.tensor([2.0, -1.0])
        fake = gen(torch.randn(128, 8))
        d_real, d_fake = disc(real), disc(fake.detach())
        d_loss = F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real)) + \
            F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake))
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_out = disc(fake)
        g_loss = F.binary_cross_entropy_with_logits(g_out, torch.ones_like(g_out))
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
    print(f"d {d_loss.item():.3f} g {g_loss.item():.3f}")


if __name__ == "__main__":
    main()
