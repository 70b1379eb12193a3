"""A blind super-resolution trainer (CMOS-style, stage 3): BlindSR wraps a pretrained estimator
network (CMOS, with BatchNorm layers) that predicts a blur map and a segmentation from the
ImageNet-normalised low-resolution input under torch.no_grad(), and an SFT-conditioned residual
SR branch that uses those estimates as priors. A B_Model class builds Adam over every parameter
with requires_grad, a MultiStepLR, optimize_parameters(step, scaler) under autocast with a
GradScaler, and test() that switches netG to eval() and back to train(); validation reports PSNR
of the SR image and of the estimated blur map (psnr_b). netG.train() also puts the frozen
estimator in training mode, so every training batch rewrites its BatchNorm running statistics:
psnr_b changes at each validation although the estimator is meant to be fixed.

Thread: https://github.com/ByChelsea/CMOS/issues/3
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


class CMOS(nn.Module):
    def __init__(self, ch=16, seg_classes=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, ch, 3, 1, 1), nn.BatchNorm2d(ch), nn.ReLU(),
                                  nn.Conv2d(ch, ch, 3, 1, 1), nn.BatchNorm2d(ch), nn.ReLU())
        self.blur_head = nn.Sequential(nn.Conv2d(ch, 1, 3, 1, 1), nn.Sigmoid())
        self.seg_head = nn.Conv2d(ch, seg_classes, 1)

    def forward(self, x):
        f = self.stem(x)
        return self.blur_head(f), self.seg_head(f), f


class SFTResBlock(nn.Module):
    def __init__(self, nf, cond):
        super().__init__()
        self.scale, self.shift = nn.Conv2d(cond, nf, 1), nn.Conv2d(cond, nf, 1)
        self.conv1, self.conv2 = nn.Conv2d(nf, nf, 3, 1, 1), nn.Conv2d(nf, nf, 3, 1, 1)

    def forward(self, x, prior):
        h = F.leaky_relu(self.conv1(x * (1 + self.scale(prior)) + self.shift(prior)), 0.1)
        return x + 0.2 * self.conv2(h)


class BlindSR(nn.Module):
    def __init__(self, nf=24, nb=3, code_length=8, scale=2):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))
        self.cmos = CMOS()
        self.blur_conv = nn.Conv2d(1, code_length, 3, 1, 1)
        self.seg_conv = nn.Conv2d(1, code_length, 3, 1, 1)
        self.conv_first = nn.Conv2d(3, nf, 3, 1, 1)
        self.trunk = nn.ModuleList([SFTResBlock(nf, 2 * code_length) for _ in range(nb)])
        self.trunk_conv = nn.Conv2d(nf, nf, 3, 1, 1)
        self.upsampler = nn.Sequential(nn.Conv2d(nf, 3 * scale * scale, 3, 1, 1), nn.PixelShuffle(scale))

    def forward(self, x):
        with torch.no_grad():
            blur_est, seg_est, _ = self.cmos((x - self.mean) / self.std)
            seg = torch.argmax(seg_est, dim=1, keepdim=True)
        prior = torch.cat([self.blur_conv(blur_est), self.seg_conv(seg.float())], 1)
        fea = lr_fea = self.conv_first(x)
        for block in self.trunk:
            fea = block(fea, prior)
        out = self.upsampler(lr_fea + self.trunk_conv(fea))
        return out, blur_est, seg_est


def load_K(net, calib_batches):
    """Stand-in for loading the stage-1 estimator checkpoint: fixed weights, calibrated BN statistics."""
    torch.manual_seed(5)
    fresh = CMOS()
    fresh.train()
    for m in fresh.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = None  # cumulative average over the calibration set
    with torch.no_grad():
        for batch in calib_batches:
            fresh((batch["LR"] - net.mean) / net.std)
    net.cmos.load_state_dict(fresh.state_dict())


def make_batches(n_batches, batch_size=4, size=32, scale=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    out = []
    for _ in range(n_batches):
        f = 3 + 9 * torch.rand(batch_size, 3, 1, 1, generator=g)
        gt = (0.5 + 0.35 * torch.sin(f * xx) * torch.cos(f * yy + 2 * torch.rand(batch_size, 3, 1, 1, generator=g)))
        split = (xx > torch.rand(batch_size, 1, 1, 1, generator=g)).float()  # right part blurred
        blurred = split * F.avg_pool2d(gt, 5, 1, 2, count_include_pad=False) + (1 - split) * gt
        lr = F.avg_pool2d(blurred, scale)
        out.append({"GT": gt, "LR": lr, "blur": F.avg_pool2d(split, scale), "seg": (F.avg_pool2d(split, scale) > 0.5).long()})
    return out


class B_Model:
    def __init__(self, lr_G=5e-4, lr_steps=(40, 70), lr_gamma=0.5):
        self.netG = BlindSR()
        self.netG.train()
        self.cri_pix = nn.L1Loss()
        optim_params = [v for k, v in self.netG.named_parameters() if v.requires_grad]
        self.optimizer_G = torch.optim.Adam(optim_params, lr=lr_G, betas=(0.9, 0.999))
        self.scheduler = torch.optim.lr_scheduler.MultiStepLR(self.optimizer_G, list(lr_steps), lr_gamma)
        self.log_dict = {}

    def feed_data(self, batch):
        self.real_H, self.LR_img, self.real_B = batch["GT"], batch["LR"], batch["blur"]

    def optimize_parameters(self, step, scaler):
        self.optimizer_G.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            self.fake_SR, self.fake_B, self.fake_S = self.netG(self.LR_img)
            l_pix = self.cri_pix(self.fake_SR.float(), self.real_H)
        self.log_dict["l_pix"] = l_pix.item()
        scaler.scale(l_pix).backward()
        scaler.step(self.optimizer_G)
        scaler.update()

    def test(self):
        self.netG.eval()
        with torch.no_grad():
            self.fake_SR, self.fake_B, self.fake_S = self.netG(self.LR_img)
        self.netG.train()


def psnr(a, b):
    return 10 * math.log10(1.0 / max(F.mse_loss(a, b).item(), 1e-10))


def main():
    torch.manual_seed(0)
    train_batches, val_batches = make_batches(20, seed=0), make_batches(4, seed=1)
    model = B_Model()
    load_K(model.netG, make_batches(30, seed=2))
    scaler = torch.amp.GradScaler("cpu")
    current_step = 0
    for epoch in range(4):
        for batch in train_batches:
            current_step += 1
            model.feed_data(batch)
            model.optimize_parameters(current_step, scaler)
            model.scheduler.step()
            if current_step % 20 == 0:
                avg_psnr_y = avg_psnr_b = 0.0
                for val in val_batches:
                    model.feed_data(val)
                    model.test()
                    avg_psnr_y += psnr(model.fake_SR.float().clamp(0, 1), val["GT"]) / len(val_batches)
                    avg_psnr_b += psnr(model.fake_B.float(), val["blur"]) / len(val_batches)
                print(f"<epoch:{epoch:3d}, iter:{current_step:5d}> l_pix {model.log_dict['l_pix']:.4f} "
                      f"psnr_y: {avg_psnr_y:.4f}, psnr_b: {avg_psnr_b:.4f}")


if __name__ == "__main__":
    main()
