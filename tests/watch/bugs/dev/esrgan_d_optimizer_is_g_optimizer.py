"""An ESRGAN training script: main() builds an RRDB-style generator, an EMA copy of it
(AveragedModel) and a patch discriminator, define_optimizer() returns one Adam per network and
define_scheduler() a MultiStepLR per optimizer, and each epoch calls
train(g_model, ema_g_model, d_model, loader, pixel/content/adversarial criteria, g_optimizer,
d_optimizer, epoch, scaler, ...) under mixed precision with a GradScaler, followed by a PSNR test.
main() passes g_optimizer in both optimizer slots, so inside train() the discriminator phase
computes and back-propagates its relativistic loss and then calls scaler.step() on the
generator's optimizer: the discriminator's weights never change, and the generator's optimizer is
stepped a second time per batch on its leftover gradients.

Thread: https://github.com/Lornatang/ESRGAN-PyTorch/issues/39
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim import lr_scheduler
from torch.optim.swa_utils import AveragedModel

CONFIG = {"SCALE": 2, "EPOCHS": 4, "LR": 2e-4, "BETAS": (0.9, 0.99), "MILESTONES": [2, 3], "GAMMA": 0.5,
          "PIXEL_WEIGHT": 0.01, "CONTENT_WEIGHT": 1.0, "ADVERSARIAL_WEIGHT": 0.005, "EMA_DECAY": 0.999}


class ResidualDenseBlock(nn.Module):
    def __init__(self, channels, growth):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, growth, 3, 1, 1)
        self.conv2 = nn.Conv2d(channels + growth, channels, 3, 1, 1)

    def forward(self, x):
        h = F.leaky_relu(self.conv1(x), 0.2)
        return x + 0.2 * self.conv2(torch.cat([x, h], 1))


class RRDBNet(nn.Module):
    def __init__(self, channels=16, growth=8, num_rrdb=2, upscale=2):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, 1, 1)
        self.trunk = nn.Sequential(*[ResidualDenseBlock(channels, growth) for _ in range(num_rrdb)])
        self.upsample = nn.Sequential(nn.Upsample(scale_factor=upscale, mode="nearest"),
                                      nn.Conv2d(channels, channels, 3, 1, 1), nn.LeakyReLU(0.2))
        self.conv_out = nn.Conv2d(channels, 3, 3, 1, 1)

    def forward(self, x):
        h = self.conv1(x)
        return self.conv_out(self.upsample(h + self.trunk(h)))


class DiscriminatorForVGG(nn.Module):
    def __init__(self, channels=16):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, channels, 3, 1, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(channels, channels, 4, 2, 1), nn.BatchNorm2d(channels), nn.LeakyReLU(0.2),
            nn.Conv2d(channels, 2 * channels, 4, 2, 1), nn.BatchNorm2d(2 * channels), nn.LeakyReLU(0.2))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(2 * channels * 4 * 4, 32),
                                        nn.LeakyReLU(0.2), nn.Linear(32, 1))

    def forward(self, x):
        return self.classifier(self.features(x))


class ContentLoss(nn.Module):
    """Feature distance in a fixed, frozen feature extractor."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(123)
        self.extractor = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 1, 1))
        for p in self.extractor.parameters():
            p.requires_grad = False

    def forward(self, sr, gt):
        return F.l1_loss(self.extractor(sr), self.extractor(gt.detach()))


def make_patches(n_batches, batch_size, scale, size=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    out = []
    for _ in range(n_batches):
        f = 2 + 8 * torch.rand(batch_size, 3, 1, 1, generator=g)
        ph = 6.28 * torch.rand(batch_size, 3, 1, 1, generator=g)
        gt = 0.5 + 0.4 * torch.sin(f * xx + ph) * torch.cos(f * yy - ph)
        out.append({"gt": gt, "lr": F.avg_pool2d(gt, scale)})
    return out


def define_optimizer(g_model, d_model, config):
    g_optimizer = torch.optim.Adam(g_model.parameters(), config["LR"], config["BETAS"])
    d_optimizer = torch.optim.Adam(d_model.parameters(), config["LR"], config["BETAS"])
    return g_optimizer, d_optimizer


def define_scheduler(g_optimizer, d_optimizer, config):
    return (lr_scheduler.MultiStepLR(g_optimizer, config["MILESTONES"], config["GAMMA"]),
            lr_scheduler.MultiStepLR(d_optimizer, config["MILESTONES"], config["GAMMA"]))


def train(g_model, ema_g_model, d_model, train_batches, pixel_criterion, content_criterion,
          adversarial_criterion, g_optimizer, d_optimizer, epoch, scaler, config):
    g_model.train()
    d_model.train()
    for batch_index, batch_data in enumerate(train_batches):
        gt, lr = batch_data["gt"], batch_data["lr"]
        real_label = torch.full([gt.shape[0], 1], 1.0)
        fake_label = torch.full([gt.shape[0], 1], 0.0)

        # generator step, discriminator frozen
        for d_parameters in d_model.parameters():
            d_parameters.requires_grad = False
        g_model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            sr = g_model(lr)
            gt_output = d_model(gt.detach().clone())
            sr_output = d_model(sr)
            pixel_loss = config["PIXEL_WEIGHT"] * pixel_criterion(sr, gt)
            content_loss = config["CONTENT_WEIGHT"] * content_criterion(sr, gt)
            d_loss_gt = adversarial_criterion(gt_output - torch.mean(sr_output), fake_label) * 0.5
            d_loss_sr = adversarial_criterion(sr_output - torch.mean(gt_output), real_label) * 0.5
            adversarial_loss = config["ADVERSARIAL_WEIGHT"] * (d_loss_gt + d_loss_sr)
            g_loss = pixel_loss + content_loss + adversarial_loss
        scaler.scale(g_loss).backward()
        scaler.step(g_optimizer)
        scaler.update()

        # discriminator step
        for d_parameters in d_model.parameters():
            d_parameters.requires_grad = True
        d_model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            gt_output = d_model(gt)
            sr_output = d_model(sr.detach().clone())
            d_loss_gt = adversarial_criterion(gt_output - torch.mean(sr_output), real_label) * 0.5
        scaler.scale(d_loss_gt).backward(retain_graph=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            sr_output = d_model(sr.detach().clone())
            d_loss_sr = adversarial_criterion(sr_output - torch.mean(gt_output), fake_label) * 0.5
        scaler.scale(d_loss_sr).backward()
        d_loss = d_loss_gt + d_loss_sr
        scaler.step(d_optimizer)
        scaler.update()

        ema_g_model.update_parameters(g_model)
        if batch_index % 10 == 0:
            print(f"Epoch [{epoch + 1}] [{batch_index}/{len(train_batches)}] G loss {g_loss.item():.4f} "
                  f"D loss {d_loss.item():.4f} D(GT) {torch.sigmoid(gt_output.detach().float().mean()).item():.3f}")


def test(g_model, test_batches):
    g_model.eval()
    psnrs = []
    with torch.no_grad():
        for batch_data in test_batches:
            sr = g_model(batch_data["lr"]).clamp(0, 1)
            mse = F.mse_loss(sr, batch_data["gt"]).item()
            psnrs.append(10 * math.log10(1.0 / max(mse, 1e-10)))
    return sum(psnrs) / len(psnrs)


def main():
    config = CONFIG
    torch.manual_seed(0)
    scaler = torch.amp.GradScaler("cpu")
    g_model, d_model = RRDBNet(upscale=config["SCALE"]), DiscriminatorForVGG()
    decay = config["EMA_DECAY"]
    ema_g_model = AveragedModel(g_model, avg_fn=lambda avg, new, num: decay * avg + (1 - decay) * new)
    pixel_criterion, content_criterion, adversarial_criterion = nn.L1Loss(), ContentLoss(), nn.BCEWithLogitsLoss()
    g_optimizer, d_optimizer = define_optimizer(g_model, d_model, config)
    g_scheduler, d_scheduler = define_scheduler(g_optimizer, d_optimizer, config)
    train_batches = make_patches(20, 16, config["SCALE"], seed=0)
    test_batches = make_patches(4, 16, config["SCALE"], seed=1)

    for epoch in range(config["EPOCHS"]):
        train(g_model, ema_g_model, d_model, train_batches, pixel_criterion, content_criterion,
              adversarial_criterion, g_optimizer, g_optimizer, epoch, scaler, config)
        g_scheduler.step()
        d_scheduler.step()
        print(f"Epoch [{epoch + 1}] test PSNR {test(g_model, test_batches):.2f} dB")


if __name__ == "__main__":
    main()
