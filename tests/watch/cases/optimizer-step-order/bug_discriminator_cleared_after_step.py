"""An unpaired image-to-image GAN trained by a train_step(batch) method with one optimizer per
network. Each optimizer clears its gradients right after its own step(), the generator's first.
The generator's adversarial loss is back-propagated through the discriminator, whose parameters
still require grad, so it leaves gradients there (pushing the discriminator to call the fakes
real); the discriminator's backward() adds its own loss to them, and opt_d.step() applies both."""
import torch
import torch.nn.functional as F
from torch import nn


class Translator:
    def __init__(self, lr=2e-4):
        self.gen = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1))
        self.disc = nn.Sequential(nn.Conv2d(3, 16, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(16, 1, 4, 2, 1))
        self.opt_g = torch.optim.Adam(self.gen.parameters(), lr=lr, betas=(0.5, 0.999))
        self.opt_d = torch.optim.Adam(self.disc.parameters(), lr=lr, betas=(0.5, 0.999))

    def train_step(self, source, target):
        fake = self.gen(source)
        logits = self.disc(fake)
        loss_g = F.mse_loss(logits, torch.ones_like(logits)) + 5.0 * F.l1_loss(fake, source)
        loss_g.backward()
        self.opt_g.step()
        self.opt_g.zero_grad()

        real_logits, fake_logits = self.disc(target), self.disc(fake.detach())
        loss_d = 0.5 * (F.mse_loss(real_logits, torch.ones_like(real_logits))
                        + F.mse_loss(fake_logits, torch.zeros_like(fake_logits)))
        loss_d.backward()
        self.opt_d.step()
        self.opt_d.zero_grad()
        return loss_g.item(), loss_d.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    sources = torch.rand(512, 3, 16, 16, generator=g)
    targets = torch.rand(512, 3, 16, 16, generator=g) ** 2
    model = Translator()
    for epoch in range(4):
        for i in range(0, 512, 32):
            losses = model.train_step(sources[i:i + 32], targets[i:i + 32])
    print(losses)


if __name__ == "__main__":
    main()
