"""A DeepFill-v2-style inpainting trainer: WGAN_trainer(opt) builds a two-stage gated generator
(coarse and refined outputs from image and mask), a mask-conditioned critic and a fixed feature
network for a perceptual loss, one Adam per network, and a per-epoch adjust_learning_rate(). Each
batch first trains the critic on the composited refined output (detached) against the real image,
then trains the generator on masked L1 for both stages, the perceptual loss and the WGAN term.
The critic's loss is back-propagated but optimizer_d.step() is never called, so the critic never
changes: the adversarial term the generator follows comes from a random, untrained network.

Thread: https://github.com/zhaoyuzhi/deepfillv2/issues/6
"""
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class GatedConv(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.feat = nn.Conv2d(cin, cout, 3, stride, 1)
        self.gate = nn.Conv2d(cin, cout, 3, stride, 1)

    def forward(self, x):
        return F.elu(self.feat(x)) * torch.sigmoid(self.gate(x))


class GatedGenerator(nn.Module):
    def __init__(self, ch=16):
        super().__init__()
        self.coarse = nn.Sequential(GatedConv(4, ch), GatedConv(ch, ch, 2), GatedConv(ch, ch),
                                    nn.Upsample(scale_factor=2), GatedConv(ch, ch), nn.Conv2d(ch, 3, 3, 1, 1))
        self.refine = nn.Sequential(GatedConv(4, ch), GatedConv(ch, ch, 2), GatedConv(ch, ch),
                                    nn.Upsample(scale_factor=2), GatedConv(ch, ch), nn.Conv2d(ch, 3, 3, 1, 1))

    def forward(self, img, mask):
        first_in = torch.cat([img * (1 - mask), mask], 1)
        first_out = torch.tanh(self.coarse(first_in))
        second_in = torch.cat([img * (1 - mask) + first_out * mask, mask], 1)
        second_out = torch.tanh(self.refine(second_in))
        return first_out, second_out


class PatchCritic(nn.Module):
    def __init__(self, ch=16):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(4, ch, 4, 2, 1), nn.LeakyReLU(0.2),
                                 nn.Conv2d(ch, 2 * ch, 4, 2, 1), nn.LeakyReLU(0.2),
                                 nn.Conv2d(2 * ch, 1, 3, 1, 1))

    def forward(self, img, mask):
        return self.net(torch.cat([img, mask], 1))


def create_perceptualnet():
    torch.manual_seed(99)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1), nn.ReLU(), nn.Conv2d(16, 16, 3, 1, 1), nn.ReLU())
    for p in net.parameters():
        p.requires_grad = False
    return net


def normalize_imagenet(x):
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    return (x - mean) / std


class InpaintDataset(Dataset):
    def __init__(self, n=128, size=32, seed=0):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
        freq = 2 + 6 * torch.rand(n, 3, 1, 1, generator=g)
        phase = 6.28 * torch.rand(n, 3, 1, 1, generator=g)
        self.images = torch.sin(freq * xx + phase) * torch.cos(freq * yy - phase)  # in [-1, 1]
        self.masks = torch.zeros(n, 1, size, size)
        corners = torch.randint(0, size - 12, (n, 2), generator=g)
        for k, (top, left) in enumerate(corners.tolist()):
            self.masks[k, :, top:top + 12, left:left + 12] = 1.0

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return self.images[idx], self.masks[idx]


def WGAN_trainer(opt):
    generator, discriminator, perceptualnet = GatedGenerator(), PatchCritic(), create_perceptualnet()
    L1Loss = nn.L1Loss()
    optimizer_g = torch.optim.Adam(generator.parameters(), lr=opt.lr_g, betas=(opt.b1, opt.b2), weight_decay=opt.weight_decay)
    optimizer_d = torch.optim.Adam(discriminator.parameters(), lr=opt.lr_d, betas=(opt.b1, opt.b2), weight_decay=opt.weight_decay)

    def adjust_learning_rate(lr_in, optimizer, epoch):
        lr = lr_in * (opt.lr_decrease_factor ** (epoch // opt.lr_decrease_epoch))
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr

    dataloader = DataLoader(InpaintDataset(), batch_size=opt.batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(1))
    for epoch in range(opt.epochs):
        for batch_idx, (img, mask) in enumerate(dataloader):
            # critic
            optimizer_d.zero_grad()
            first_out, second_out = generator(img, mask)
            first_out_wholeimg = img * (1 - mask) + first_out * mask
            second_out_wholeimg = img * (1 - mask) + second_out * mask
            fake_scalar = discriminator(second_out_wholeimg.detach(), mask)
            true_scalar = discriminator(img, mask)
            loss_D = -torch.mean(true_scalar) + torch.mean(fake_scalar)
            loss_D.backward()

            # generator
            optimizer_g.zero_grad()
            first_MaskL1Loss = L1Loss(first_out_wholeimg, img)
            second_MaskL1Loss = L1Loss(second_out_wholeimg, img)
            GAN_Loss = -torch.mean(discriminator(second_out_wholeimg, mask))
            img_features = perceptualnet(normalize_imagenet((img + 1) / 2))
            out_features = perceptualnet(normalize_imagenet((second_out_wholeimg + 1) / 2))
            second_PerceptualLoss = L1Loss(out_features, img_features)
            loss = first_MaskL1Loss + second_MaskL1Loss + opt.perceptual_param * second_PerceptualLoss \
                + opt.gan_param * GAN_Loss
            loss.backward()
            optimizer_g.step()

            if batch_idx % 10 == 0:
                print(f"[Epoch {epoch + 1}/{opt.epochs}] [Batch {batch_idx}/{len(dataloader)}] "
                      f"[first L1 {first_MaskL1Loss.item():.4f}] [second L1 {second_MaskL1Loss.item():.4f}] "
                      f"[D {loss_D.item():.4f}] [G {GAN_Loss.item():.4f}] [perc {second_PerceptualLoss.item():.4f}]")
        adjust_learning_rate(opt.lr_g, optimizer_g, epoch + 1)
        adjust_learning_rate(opt.lr_d, optimizer_d, epoch + 1)


if __name__ == "__main__":
    torch.manual_seed(0)
    WGAN_trainer(SimpleNamespace(epochs=4, batch_size=8, lr_g=1e-3, lr_d=4e-4, b1=0.5, b2=0.999, weight_decay=0.0,
                                 lr_decrease_factor=0.5, lr_decrease_epoch=10, perceptual_param=10.0, gan_param=0.01))
