"""A GAN with two optimizers built by a helper from a config: the discriminator's learning rate
was typed as 2e-10 instead of 2e-4, so the discriminator never learns while the generator does
(the generator's own learning rate is right)."""
import torch
from torch import nn

CONFIG = {"lr_g": 2e-4, "lr_d": 2e-10, "betas": (0.5, 0.999), "noise": 8}


def make_optimizers(generator, discriminator, config):
    opt_g = torch.optim.Adam(generator.parameters(), lr=config["lr_g"], betas=config["betas"])
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=config["lr_d"], betas=config["betas"])
    return opt_g, opt_d


def train_step(generator, discriminator, opt_g, opt_d, real, config):
    bce = nn.functional.binary_cross_entropy_with_logits
    z = torch.randn(len(real), config["noise"])
    fake = generator(z)
    opt_d.zero_grad()
    d_real, d_fake = discriminator(real), discriminator(fake.detach())
    d_loss = bce(d_real, torch.ones_like(d_real)) + bce(d_fake, torch.zeros_like(d_fake))
    d_loss.backward()
    opt_d.step()
    opt_g.zero_grad()
    d_out = discriminator(fake)
    g_loss = bce(d_out, torch.ones_like(d_out))
    g_loss.backward()
    opt_g.step()
    return d_loss.item(), g_loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    real_data = torch.randn(1024, 4, generator=g) * torch.tensor([1.0, 0.5, 2.0, 0.1]) + 1.0
    generator = nn.Sequential(nn.Linear(CONFIG["noise"], 32), nn.ReLU(), nn.Linear(32, 4))
    discriminator = nn.Sequential(nn.Linear(4, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    opt_g, opt_d = make_optimizers(generator, discriminator, CONFIG)
    for step in range(60):
        i = (step * 64) % 1024
        d_loss, g_loss = train_step(generator, discriminator, opt_g, opt_d, real_data[i:i + 64], CONFIG)
    print(f"d loss {d_loss:.3f}, g loss {g_loss:.3f}")


if __name__ == "__main__":
    main()
