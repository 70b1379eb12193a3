"""Healthy look-alike of optimizer-step-order: a pix2pix-style trainer whose optimizers clear their
gradients right after their own step(), and which turns the discriminator's requires_grad off
while the generator's loss is back-propagated (set_requires_grad(disc, False)), so that loss leaves
nothing in the discriminator; a shared-encoder model with two heads and two optimizers stepped
one after the other on one loss; and gradient accumulation over two micro-batches."""
import torch
import torch.nn.functional as F
from torch import nn


def set_requires_grad(net, flag):
    for p in net.parameters():
        p.requires_grad_(flag)


def main():
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1))
    disc = nn.Sequential(nn.Conv2d(3, 16, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(16, 1, 4, 2, 1))
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    encoder, head_a, head_b = nn.Linear(8, 16), nn.Linear(16, 2), nn.Linear(16, 1)
    opt_body = torch.optim.SGD(list(encoder.parameters()) + list(head_a.parameters()), lr=0.01)
    opt_head_b = torch.optim.SGD(head_b.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    sources = torch.rand(512, 3, 16, 16, generator=g)
    targets = torch.rand(512, 3, 16, 16, generator=g) ** 2
    for epoch in range(4):
        for i in range(0, 512, 32):
            source, target = sources[i:i + 32], targets[i:i + 32]
            fake = gen(source)
            set_requires_grad(disc, False)
            logits = disc(fake)
            (F.mse_loss(logits, torch.ones_like(logits)) + 5.0 * F.l1_loss(fake, source)).backward()
            opt_g.step()
            opt_g.zero_grad()
            set_requires_grad(disc, True)
            real_logits, fake_logits = disc(target), disc(fake.detach())
            (0.5 * (F.mse_loss(real_logits, torch.ones_like(real_logits))
                    + F.mse_loss(fake_logits, torch.zeros_like(fake_logits)))).backward()
            opt_d.step()
            opt_d.zero_grad()

            x = torch.randn(32, 8, generator=g)
            h = torch.relu(encoder(x))
            loss = F.cross_entropy(head_a(h), (x[:, 0] > 0).long()) + F.mse_loss(head_b(h).squeeze(1), x[:, 1])
            opt_body.zero_grad()
            opt_head_b.zero_grad()
            loss.backward()
            opt_body.step()
            opt_head_b.step()

            for half in x.split(16):
                (head_b(torch.relu(encoder(half))).pow(2).mean() / 2).backward()
            opt_head_b.step()
            opt_head_b.zero_grad()
            opt_body.zero_grad()


if __name__ == "__main__":
    main()
