"""A conditional GAN for image-to-image translation, trained by a Trainer class with one optimizer
per network. update_discriminator() clears the discriminator's gradients, back-propagates its
loss and steps its own optimizer, self.opt_d."""
import torch
import torch.nn.functional as F
from torch import nn


def generator():
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 3, padding=1), nn.Tanh())


def discriminator():
    return nn.Sequential(nn.Conv2d(2, 16, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
                         nn.Conv2d(16, 1, 4, stride=2, padding=1))


class Trainer:
    def __init__(self, lr=2e-4, l1_weight=10.0):
        self.gen, self.disc = generator(), discriminator()
        self.opt_g = torch.optim.Adam(self.gen.parameters(), lr=lr, betas=(0.5, 0.999))
        self.opt_d = torch.optim.Adam(self.disc.parameters(), lr=lr, betas=(0.5, 0.999))
        self.l1_weight = l1_weight

    def update_discriminator(self, source, target, fake):
        real_logits = self.disc(torch.cat([source, target], 1))
        fake_logits = self.disc(torch.cat([source, fake.detach()], 1))
        loss = (F.binary_cross_entropy_with_logits(real_logits, torch.ones_like(real_logits))
                + F.binary_cross_entropy_with_logits(fake_logits, torch.zeros_like(fake_logits))) / 2
        self.opt_d.zero_grad()
        loss.backward()
        self.opt_d.step()
        return loss.item()

    def update_generator(self, source, target, fake):
        logits = self.disc(torch.cat([source, fake], 1))
        loss = F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits)) + self.l1_weight * F.l1_loss(fake, target)
        self.opt_g.zero_grad()
        loss.backward()
        self.opt_g.step()
        return loss.item()

    def fit(self, pairs, iterations, batch_size=16):
        g = torch.Generator().manual_seed(1)
        sources, targets = pairs
        for _ in range(iterations):
            idx = torch.randint(0, len(sources), (batch_size,), generator=g)
            source, target = sources[idx], targets[idx]
            fake = self.gen(source)
            d_loss = self.update_discriminator(source, target, fake)
            g_loss = self.update_generator(source, target, fake)
        return d_loss, g_loss


def make_pairs(n=512, seed=0):
    g = torch.Generator().manual_seed(seed)
    source = torch.rand(n, 1, 16, 16, generator=g) * 2 - 1
    return source, torch.flip(source, dims=[3])  # the task: mirror the image


def main():
    torch.manual_seed(0)
    print(Trainer().fit(make_pairs(), iterations=60))


if __name__ == "__main__":
    main()
