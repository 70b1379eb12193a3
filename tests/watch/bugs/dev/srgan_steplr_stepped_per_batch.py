"""An SRGAN training script: a generator that upsamples low-resolution patches and a patch
discriminator, each with its own Adam optimizer and a StepLR(step_size=epochs // 2, gamma=0.1)
meant to cut the learning rate once, halfway through training. Both schedulers are stepped inside
the batch loop, right after the optimizers, so the rate drops tenfold every epochs // 2 batches and
is near zero after a few dozen iterations; the content loss stops improving early.

Thread: https://github.com/Lornatang/SRGAN-PyTorch/issues/1
"""
import torch
import torch.nn.functional as F
from torch import nn


class Generator(nn.Module):
    def __init__(self, channels=32, upscale=2):
        super().__init__()
        self.head = nn.Sequential(nn.Conv2d(3, channels, 5, padding=2), nn.PReLU())
        self.body = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.PReLU(),
                                  nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels))
        self.upsample = nn.Sequential(nn.Conv2d(channels, channels * upscale ** 2, 3, padding=1),
                                      nn.PixelShuffle(upscale), nn.PReLU())
        self.tail = nn.Conv2d(channels, 3, 5, padding=2)

    def forward(self, lr):
        h = self.head(lr)
        return self.tail(self.upsample(h + self.body(h)))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.LeakyReLU(0.2),
                                 nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.LeakyReLU(0.2),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 1))

    def forward(self, x):
        return self.net(x)


def patch_pairs(n_batches, batch_size=16, size=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    out = []
    for _ in range(n_batches):
        f = 2 + 6 * torch.rand(batch_size, 3, 1, 1, generator=g)
        ph = 6.28 * torch.rand(batch_size, 3, 1, 1, generator=g)
        hr = torch.sin(f * xx + ph) * torch.cos(f * yy - ph)
        lr = F.avg_pool2d(hr, 2)
        out.append((lr, hr))
    return out


def main():
    torch.manual_seed(0)
    epochs = 4
    netG, netD = Generator(), Discriminator()
    optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-3)
    optimizerD = torch.optim.Adam(netD.parameters(), lr=1e-3)
    schedulerG = torch.optim.lr_scheduler.StepLR(optimizerG, step_size=epochs // 2, gamma=0.1)
    schedulerD = torch.optim.lr_scheduler.StepLR(optimizerD, step_size=epochs // 2, gamma=0.1)
    dataloader = patch_pairs(20)
    adversarial_criterion = nn.BCEWithLogitsLoss()
    content_criterion = nn.MSELoss()
    iteration = 0
    for epoch in range(epochs):
        netG.train()
        netD.train()
        for i, (lr, hr) in enumerate(dataloader):
            sr = netG(lr)
            real_label, fake_label = torch.ones(hr.size(0), 1), torch.zeros(hr.size(0), 1)

            netD.zero_grad()
            errD = adversarial_criterion(netD(hr), real_label) + adversarial_criterion(netD(sr.detach()), fake_label)
            errD.backward()
            optimizerD.step()

            netG.zero_grad()
            content_loss = content_criterion(sr, hr)
            errG = content_loss + 1e-3 * adversarial_criterion(netD(sr), real_label)
            errG.backward()
            optimizerG.step()

            schedulerD.step()
            schedulerG.step()
            if iteration % 15 == 0:
                print(f"[{epoch}/{epochs}][{i}/{len(dataloader)}] Loss_D {errD.item():.4f} "
                      f"content {content_loss.item():.4f} lrG {optimizerG.param_groups[0]['lr']:.2e}")
            iteration += 1


if __name__ == "__main__":
    main()
