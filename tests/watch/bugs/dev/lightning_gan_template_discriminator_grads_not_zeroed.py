"""A GAN written in the style of an early PyTorch Lightning domain template: a GAN LightningModule-like
class with generator and discriminator submodules, configure_optimizers() returning one Adam per
network, and training_step(batch, batch_idx, optimizer_idx) that returns the generator loss for
optimizer 0 and the discriminator loss for optimizer 1. A small hand-written MiniTrainer plays the
role of the framework loop: for every batch it visits the optimizers in order and, for each, calls
training_step, backward on the returned loss, optimizer.step() and then that optimizer's
zero_grad(). Data: 2-D points on a ring of Gaussians; the generator maps noise to 2-D points.

Bug: the generator loss is computed through the discriminator, so its backward also fills the
discriminator's .grad. The loop only clears the gradients of the optimizer that just stepped (the
generator's), and clears them after the step, so when the discriminator's turn comes its backward
adds onto gradients left over from the generator pass (which push D to call fakes real). Every
discriminator update is the sum of its own gradient and that stale adversarial one, so D is
trained on a corrupted objective and the adversarial game is distorted without any error.

Thread: https://github.com/Lightning-AI/pytorch-lightning/issues/557
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


class Generator(nn.Module):
    def __init__(self, latent_dim=8):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(latent_dim, 64), nn.LeakyReLU(0.2),
                                 nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, 2))

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2),
                                 nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))

    def forward(self, x):
        return self.net(x)


class GAN(nn.Module):
    def __init__(self, latent_dim=8, lr=2e-3):
        super().__init__()
        self.latent_dim = latent_dim
        self.lr = lr
        self.generator = Generator(latent_dim)
        self.discriminator = Discriminator()
        self.generated = None

    def forward(self, z):
        return self.generator(z)

    def adversarial_loss(self, logits, target):
        return F.binary_cross_entropy_with_logits(logits, target)

    def training_step(self, batch, batch_idx, optimizer_idx):
        real = batch
        if optimizer_idx == 0:
            z = torch.randn(real.shape[0], self.latent_dim)
            self.generated = self(z)
            valid = torch.ones(real.shape[0], 1)
            g_loss = self.adversarial_loss(self.discriminator(self.generated), valid)
            return {"loss": g_loss, "log": {"g_loss": g_loss.item()}}
        if optimizer_idx == 1:
            valid = torch.ones(real.shape[0], 1)
            fake = torch.zeros(real.shape[0], 1)
            real_loss = self.adversarial_loss(self.discriminator(real), valid)
            fake_loss = self.adversarial_loss(self.discriminator(self.generated.detach()), fake)
            d_loss = (real_loss + fake_loss) / 2
            return {"loss": d_loss, "log": {"d_loss": d_loss.item()}}

    def configure_optimizers(self):
        opt_g = torch.optim.Adam(self.generator.parameters(), lr=self.lr, betas=(0.5, 0.999))
        opt_d = torch.optim.Adam(self.discriminator.parameters(), lr=self.lr, betas=(0.5, 0.999))
        return [opt_g, opt_d]


class MiniTrainer:
    def __init__(self, max_epochs, log_every=25):
        self.max_epochs = max_epochs
        self.log_every = log_every
        self.global_step = 0

    def optimizer_step(self, optimizer):
        optimizer.step()
        optimizer.zero_grad()

    def fit(self, module, loader):
        optimizers = module.configure_optimizers()
        module.train()
        for epoch in range(self.max_epochs):
            for batch_idx, batch in enumerate(loader):
                logs = {}
                for opt_idx, optimizer in enumerate(optimizers):
                    output = module.training_step(batch, batch_idx, opt_idx)
                    output["loss"].backward()
                    self.optimizer_step(optimizer)
                    logs.update(output["log"])
                if self.global_step % self.log_every == 0:
                    print(f"epoch {epoch} step {self.global_step} "
                          + " ".join(f"{k} {v:.4f}" for k, v in logs.items()))
                self.global_step += 1


def ring_of_gaussians(n, g, modes=8, radius=2.0, std=0.05):
    k = torch.randint(0, modes, (n,), generator=g)
    angle = 2 * math.pi * k.float() / modes
    centers = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], 1)
    return centers + std * torch.randn(n, 2, generator=g)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = ring_of_gaussians(4096, g)
    loader = [data[i:i + 64] for i in range(0, len(data), 64)]
    model = GAN()
    MiniTrainer(max_epochs=3).fit(model, loader)
    with torch.no_grad():
        samples = model(torch.randn(1000, model.latent_dim))
        radius = samples.norm(dim=1)
    print(f"sample radius mean {radius.mean().item():.3f} std {radius.std().item():.3f} (target 2.0)")


if __name__ == "__main__":
    main()
