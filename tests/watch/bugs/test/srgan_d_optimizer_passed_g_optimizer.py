"""An SRGAN training script: a residual generator that upsamples low-resolution patches, a VGG-style
discriminator, define_optimizer() returning one Adam for each, and a train(g_model, d_model, ...,
g_optimizer, d_optimizer, epoch, config) function that first updates the generator (pixel + content
+ 0.001 * adversarial loss, discriminator frozen) and then the discriminator on real and detached
fake patches. main() calls train(..., g_optimizer, g_optimizer, ...), passing the generator's
optimizer in the discriminator's slot: the discriminator step applies the generator's leftover
gradients a second time and the discriminator's own gradients are never applied, so it keeps its
initial weights for the whole run.

Thread: https://github.com/Lornatang/SRGAN-PyTorch/issues/85
"""
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.optim import lr_scheduler


class ResidualConvBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.rcb = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.PReLU(),
                                 nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels))

    def forward(self, x):
        return x + self.rcb(x)


class SRResNet(nn.Module):
    def __init__(self, channels=32, num_rcb=3, upscale=2):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(3, channels, 9, padding=4), nn.PReLU())
        self.trunk = nn.Sequential(*[ResidualConvBlock(channels) for _ in range(num_rcb)])
        self.conv2 = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels))
        self.upsampling = nn.Sequential(nn.Conv2d(channels, channels * upscale ** 2, 3, padding=1),
                                        nn.PixelShuffle(upscale), nn.PReLU())
        self.conv3 = nn.Conv2d(channels, 3, 9, padding=4)

    def forward(self, x):
        out1 = self.conv1(x)
        return self.conv3(self.upsampling(out1 + self.conv2(self.trunk(out1))))


class DiscriminatorForVGG(nn.Module):
    def __init__(self, channels=32):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1), nn.LeakyReLU(0.2),
            nn.Conv2d(channels, channels, 3, stride=2, padding=1), nn.BatchNorm2d(channels), nn.LeakyReLU(0.2),
            nn.Conv2d(channels, 2 * channels, 3, stride=2, padding=1), nn.BatchNorm2d(2 * channels), nn.LeakyReLU(0.2))
        self.classifier = nn.Sequential(nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(8 * channels, 64),
                                        nn.LeakyReLU(0.2), nn.Linear(64, 1))

    def forward(self, x):
        return self.classifier(self.features(x))


class ContentLoss(nn.Module):
    """Feature-space MSE through a fixed (frozen) convolutional feature extractor."""

    def __init__(self):
        super().__init__()
        self.feature_extractor = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                                               nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        for p in self.feature_extractor.parameters():
            p.requires_grad = False

    def forward(self, sr, gt):
        return F.mse_loss(self.feature_extractor(sr), self.feature_extractor(gt))


def define_optimizer(g_model, d_model, config):
    g_optimizer = optim.Adam(g_model.parameters(), config["LR"], config["BETAS"])
    d_optimizer = optim.Adam(d_model.parameters(), config["LR"], config["BETAS"])
    return g_optimizer, d_optimizer


def train(g_model, d_model, train_batches, pixel_criterion, content_criterion, adversarial_criterion,
          g_optimizer, d_optimizer, epoch, config):
    g_model.train()
    d_model.train()
    for batch_index, (gt, lr) in enumerate(train_batches):
        real_label = torch.full([gt.shape[0], 1], 1.0)
        fake_label = torch.full([gt.shape[0], 1], 0.0)

        for d_parameters in d_model.parameters():
            d_parameters.requires_grad = False
        g_model.zero_grad(set_to_none=True)
        sr = g_model(lr)
        pixel_loss = config["PIXEL_WEIGHT"] * pixel_criterion(sr, gt)
        feature_loss = config["CONTENT_WEIGHT"] * content_criterion(sr, gt)
        adversarial_loss = config["ADVERSARIAL_WEIGHT"] * adversarial_criterion(d_model(sr), real_label)
        g_loss = pixel_loss + feature_loss + adversarial_loss
        g_loss.backward()
        g_optimizer.step()

        for d_parameters in d_model.parameters():
            d_parameters.requires_grad = True
        d_model.zero_grad(set_to_none=True)
        gt_output = d_model(gt)
        d_loss_gt = adversarial_criterion(gt_output, real_label)
        d_loss_gt.backward()
        sr_output = d_model(sr.detach().clone())
        d_loss_sr = adversarial_criterion(sr_output, fake_label)
        d_loss_sr.backward()
        d_loss = d_loss_gt + d_loss_sr
        d_optimizer.step()

        if batch_index % 10 == 0:
            print(f"Epoch: [{epoch + 1}][{batch_index}/{len(train_batches)}] G Loss {g_loss.item():.6f} "
                  f"D Loss {d_loss.item():.6f} D(GT) {torch.sigmoid(gt_output.mean()).item():.3f} "
                  f"D(SR) {torch.sigmoid(sr_output.mean()).item():.3f}")


def test(g_model, test_batches):
    g_model.eval()
    psnr = 0.0
    with torch.no_grad():
        for gt, lr in test_batches:
            mse = F.mse_loss(g_model(lr).clamp(0, 1), gt)
            psnr += 10 * torch.log10(1.0 / mse).item()
    return psnr / len(test_batches)


def texture_pairs(n_batches, batch_size=16, size=24, scale=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    out = []
    for _ in range(n_batches):
        f = 3 + 9 * torch.rand(batch_size, 3, 1, 1, generator=g)
        ph = 6.28 * torch.rand(batch_size, 3, 1, 1, generator=g)
        gt = 0.5 + 0.4 * torch.sin(f * xx + ph) * torch.cos(f * yy - ph)
        out.append((gt, F.avg_pool2d(gt, scale)))
    return out


def main():
    config = {"LR": 5e-4, "BETAS": (0.9, 0.999), "EPOCHS": 4, "MILESTONES": [3], "GAMMA": 0.5,
              "PIXEL_WEIGHT": 1.0, "CONTENT_WEIGHT": 1.0, "ADVERSARIAL_WEIGHT": 0.001}
    torch.manual_seed(0)
    train_batches, test_batches = texture_pairs(20, seed=0), texture_pairs(3, seed=1)
    g_model, d_model = SRResNet(), DiscriminatorForVGG()
    pixel_criterion, content_criterion, adversarial_criterion = nn.MSELoss(), ContentLoss(), nn.BCEWithLogitsLoss()
    g_optimizer, d_optimizer = define_optimizer(g_model, d_model, config)
    g_scheduler = lr_scheduler.MultiStepLR(g_optimizer, config["MILESTONES"], config["GAMMA"])
    d_scheduler = lr_scheduler.MultiStepLR(d_optimizer, config["MILESTONES"], config["GAMMA"])
    for epoch in range(config["EPOCHS"]):
        train(g_model, d_model, train_batches, pixel_criterion, content_criterion, adversarial_criterion,
              g_optimizer, g_optimizer, epoch, config)
        g_scheduler.step()
        d_scheduler.step()
        print(f"Epoch {epoch + 1}: test PSNR {test(g_model, test_batches):.2f} dB")


if __name__ == "__main__":
    main()
