"""An autoencoder with an adversarial term, in the VQGAN style: the discriminator's loss is scaled
by disc_factor, 0.0 until step DISC_START and 1.0 after, so its first backward() calls run on a
loss times 0. That is a planned start, not a batch without labels: the zeros come only before the
discriminator's first real loss, at their own backward() line."""
import torch
import torch.nn.functional as F
from torch import nn

DISC_START = 30


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 8))
        self.dec = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 32))

    def forward(self, x):
        return self.dec(self.enc(x))


def adopt_weight(step, start):
    return 0.0 if step < start else 1.0


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = torch.randn(2048, 32, generator=g)
    ae = AutoEncoder()
    disc = nn.Sequential(nn.Linear(32, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    opt_ae = torch.optim.Adam(ae.parameters(), lr=1e-3)
    opt_disc = torch.optim.Adam(disc.parameters(), lr=1e-3)
    for step in range(60):
        x = data[(step * 32) % 2048:(step * 32) % 2048 + 32]
        disc_factor = adopt_weight(step, DISC_START)
        recon = ae(x)
        g_loss = -disc(recon).mean()
        ae_loss = F.mse_loss(recon, x) + 0.1 * disc_factor * g_loss
        opt_ae.zero_grad()
        ae_loss.backward()
        opt_ae.step()

        logits_real, logits_fake = disc(x), disc(recon.detach())
        d_loss = disc_factor * 0.5 * (F.relu(1.0 - logits_real).mean() + F.relu(1.0 + logits_fake).mean())
        opt_disc.zero_grad()
        d_loss.backward()
        opt_disc.step()
    print(f"ae {ae_loss.item():.3f} disc {d_loss.item():.3f}")


if __name__ == "__main__":
    main()
