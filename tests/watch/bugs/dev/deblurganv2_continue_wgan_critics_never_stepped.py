"""A DeblurGAN-v2-style deblurring trainer: Continue_train_WGAN(opt) builds a lightweight
encoder-decoder generator that predicts the sharp image from the blurred one, a global critic on
the whole image and a patch critic on a random crop, a fixed feature network for a perceptual
loss, and one Adam per network (optimizer_G, optimizer_D1, optimizer_D2); adjust_learning_rate()
is called every iteration with the epoch number. Each batch back-propagates both critics' WGAN
losses, then trains the generator on L1 + perceptual + both adversarial terms. Neither
optimizer_D1.step() nor optimizer_D2.step() is ever called, so both critics keep their random
initial weights and the generator's adversarial terms follow untrained networks.

Thread: https://github.com/zhaoyuzhi/DeblurGANv2-MobileNetv123-PyTorch/issues/7
"""
import random
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def dw_block(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cin, 3, stride, 1, groups=cin), nn.BatchNorm2d(cin), nn.ReLU6(),
                         nn.Conv2d(cin, cout, 1), nn.BatchNorm2d(cout), nn.ReLU6())


class MobileDeblurGenerator(nn.Module):
    def __init__(self, ch=16):
        super().__init__()
        self.enc1 = dw_block(3, ch)
        self.enc2 = dw_block(ch, 2 * ch, 2)
        self.mid = dw_block(2 * ch, 2 * ch)
        self.dec = nn.Sequential(nn.Upsample(scale_factor=2), dw_block(2 * ch, ch))
        self.out = nn.Conv2d(2 * ch, 3, 3, 1, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        d = self.dec(self.mid(self.enc2(e1)))
        return torch.clamp(x + torch.tanh(self.out(torch.cat([d, e1], 1))), -1, 1)


def create_discriminator(ch=16):
    return nn.Sequential(nn.Conv2d(3, ch, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(ch, 2 * ch, 4, 2, 1),
                         nn.LeakyReLU(0.2), nn.Conv2d(2 * ch, 1, 3, 1, 1))


def create_perceptualnet():
    torch.manual_seed(7)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1), nn.ReLU(), nn.Conv2d(16, 16, 3, 1, 1), nn.ReLU())
    for p in net.parameters():
        p.requires_grad = False
    return net


def blurred_pairs(n=128, size=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    freq = 3 + 8 * torch.rand(n, 3, 1, 1, generator=g)
    phase = 6.28 * torch.rand(n, 3, 1, 1, generator=g)
    sharp = torch.sign(torch.sin(freq * xx + phase)) * 0.5 + 0.3 * torch.cos(freq * yy)
    kernel = torch.ones(3, 1, 1, 7) / 7.0  # horizontal motion blur
    blurred = F.conv2d(F.pad(sharp, (3, 3, 0, 0), mode="replicate"), kernel, groups=3)
    return blurred, sharp


def Continue_train_WGAN(opt):
    criterion_L1 = nn.L1Loss()
    generator = MobileDeblurGenerator()
    global_discriminator, patch_discriminator = create_discriminator(), create_discriminator()
    perceptualnet = create_perceptualnet()
    optimizer_G = torch.optim.Adam(generator.parameters(), lr=opt.lr, betas=(opt.b1, opt.b2), weight_decay=opt.weight_decay)
    optimizer_D1 = torch.optim.Adam(global_discriminator.parameters(), lr=opt.lr, betas=(opt.b1, opt.b2))
    optimizer_D2 = torch.optim.Adam(patch_discriminator.parameters(), lr=opt.lr, betas=(opt.b1, opt.b2))

    def adjust_learning_rate(opt, epoch, optimizer):
        if epoch >= opt.lr_decrease_epoch:
            lr = max(opt.lr * (opt.epochs - epoch) / (opt.epochs - opt.lr_decrease_epoch), 1e-7)
            for param_group in optimizer.param_groups:
                param_group["lr"] = lr

    train_loader = DataLoader(TensorDataset(*blurred_pairs()), batch_size=opt.train_batch_size, shuffle=True,
                              generator=torch.Generator().manual_seed(1))
    for epoch in range(opt.epochs):
        for i, (true_input, true_target) in enumerate(train_loader):
            optimizer_D1.zero_grad()
            optimizer_D2.zero_grad()
            fake_target = generator(true_input)
            rand_h = random.randint(0, opt.crop_size - opt.patch_size)
            rand_w = random.randint(0, opt.crop_size - opt.patch_size)
            fake_target_patch = fake_target[:, :, rand_h:rand_h + opt.patch_size, rand_w:rand_w + opt.patch_size]
            true_target_patch = true_target[:, :, rand_h:rand_h + opt.patch_size, rand_w:rand_w + opt.patch_size]

            loss_D1 = -torch.mean(global_discriminator(true_target)) + torch.mean(global_discriminator(fake_target.detach()))
            loss_D1.backward()
            loss_D2 = -torch.mean(patch_discriminator(true_target_patch)) + torch.mean(patch_discriminator(fake_target_patch.detach()))
            loss_D2.backward()

            optimizer_G.zero_grad()
            fake_target = generator(true_input)
            fake_target_patch = fake_target[:, :, rand_h:rand_h + opt.patch_size, rand_w:rand_w + opt.patch_size]
            Pixellevel_L1_Loss = criterion_L1(fake_target, true_target)
            Perceptual_Loss = criterion_L1(perceptualnet(fake_target), perceptualnet(true_target))
            Global_GAN_Loss = -torch.mean(global_discriminator(fake_target))
            Patch_GAN_Loss = -torch.mean(patch_discriminator(fake_target_patch))
            loss = opt.lambda_l1 * Pixellevel_L1_Loss + opt.lambda_percep * Perceptual_Loss \
                + opt.lambda_gan * (Global_GAN_Loss + Patch_GAN_Loss)
            loss.backward()
            optimizer_G.step()

            if i % 8 == 0:
                print(f"[Epoch {epoch + 1}/{opt.epochs}] [Batch {i}/{len(train_loader)}] [L1 {Pixellevel_L1_Loss.item():.4f}] "
                      f"[Perceptual {Perceptual_Loss.item():.4f}] [Global G {Global_GAN_Loss.item():.4f}, D {loss_D1.item():.4f}] "
                      f"[Patch G {Patch_GAN_Loss.item():.4f}, D {loss_D2.item():.4f}]")
            adjust_learning_rate(opt, epoch + 1, optimizer_G)
            adjust_learning_rate(opt, epoch + 1, optimizer_D1)
            adjust_learning_rate(opt, epoch + 1, optimizer_D2)


if __name__ == "__main__":
    random.seed(0)
    torch.manual_seed(0)
    Continue_train_WGAN(SimpleNamespace(epochs=5, train_batch_size=8, lr=2e-4, b1=0.5, b2=0.999, weight_decay=0.0,
                                        lr_decrease_epoch=3, crop_size=32, patch_size=16,
                                        lambda_l1=1.0, lambda_percep=1.0, lambda_gan=0.01))
