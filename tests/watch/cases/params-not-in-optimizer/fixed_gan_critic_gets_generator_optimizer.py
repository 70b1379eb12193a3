"""Fixed twin of bug_gan_critic_gets_generator_optimizer: train_epoch gets each network's own
optimizer, so the critic's phase steps the critic."""
import torch
import torch.nn.functional as F
from torch import nn


def train_epoch(generator, critic, g_opt, d_opt, real_batches, g):
    for real in real_batches:
        fake = generator(torch.randn(len(real), 4, generator=g))
        for p in critic.parameters():
            p.requires_grad_(True)
        d_loss = F.softplus(critic(fake.detach())).mean() + F.softplus(-critic(real)).mean()
        d_opt.zero_grad()
        d_loss.backward()
        d_opt.step()
        for p in critic.parameters():
            p.requires_grad_(False)
        g_loss = F.softplus(-critic(fake)).mean()
        g_opt.zero_grad()
        g_loss.backward()
        g_opt.step()
    return d_loss.item(), g_loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    generator = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
    critic = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    g_opt = torch.optim.Adam(generator.parameters(), lr=1e-3, betas=(0.5, 0.999))
    d_opt = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.999))
    for epoch in range(3):
        batches = [torch.randn(32, 2, generator=g) * 0.3 + torch.tensor([2.0, -1.0]) for _ in range(20)]
        d_loss, g_loss = train_epoch(generator, critic, g_opt, d_opt, batches, g)
        print(f"epoch {epoch} d_loss {d_loss:.3f} g_loss {g_loss:.3f}")


if __name__ == "__main__":
    main()
