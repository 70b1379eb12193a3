"""A Lightning-style DRAEM surface-anomaly model: a datamodule whose default transform resizes and then
applies ImageNet mean/std normalisation, and a Draem module whose training_step takes the batch of
normal images, lets an Augmenter paste synthetic anomalies (a thresholded smooth-noise mask filled with a
texture drawn in [0, 1], blended with a random beta), runs a reconstructive and a discriminative
sub-network and returns DraemLoss (L2 + SSIM on the reconstruction + focal loss on the predicted mask);
configure_optimizers gives Adam. A small fit() loop of our own stands in for the
Trainer, followed by a pixel-AUROC test on images with real defects. The datamodule's ImageNet
normalisation is applied although DRAEM works on images in [0, 1]: the normal images arrive on the
normalised scale while the pasted anomaly textures stay in [0, 1], so the networks learn to spot
patches on a different scale rather than defects, and the reconstruction target is on the wrong range.

Thread: https://github.com/open-edge-platform/anomalib/issues/1813
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

IMAGENET_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
IMAGENET_STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def smooth_noise(n, size, scale, g):
    coarse = torch.rand(n, 1, size // scale, size // scale, generator=g)
    return F.interpolate(coarse, size=(size, size), mode="bilinear", align_corners=False)


class Augmenter:
    def __init__(self, beta=(0.1, 1.0), generator=None):
        self.beta = beta
        self.g = generator

    def augment_batch(self, batch):
        n, c, h, w = batch.shape
        noise = smooth_noise(n, h, 4, self.g)
        mask = (noise > 0.7).float()
        keep = (torch.rand(n, 1, 1, 1, generator=self.g) < 0.5).float()  # half the batch stays normal
        mask = mask * keep
        texture = smooth_noise(n * c, h, 2, self.g).view(n, c, h, w)  # anomaly source in [0, 1]
        beta = torch.empty(n, 1, 1, 1).uniform_(*self.beta, generator=self.g)
        augmented = batch * (1 - mask) + (1 - beta) * texture * mask + beta * batch * mask
        return augmented, mask


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class ReconstructiveSubNetwork(nn.Module):
    def __init__(self, ch=3, width=16):
        super().__init__()
        self.enc = nn.Sequential(block(ch, width), nn.MaxPool2d(2), block(width, 2 * width))
        self.dec = nn.Sequential(nn.Upsample(scale_factor=2), block(2 * width, width), nn.Conv2d(width, ch, 3, padding=1))

    def forward(self, x):
        return self.dec(self.enc(x))


class DiscriminativeSubNetwork(nn.Module):
    def __init__(self, ch=6, width=16):
        super().__init__()
        self.net = nn.Sequential(block(ch, width), block(width, width), nn.Conv2d(width, 2, 3, padding=1))

    def forward(self, x):
        return self.net(x)


class DraemModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.reconstructive_subnetwork = ReconstructiveSubNetwork()
        self.discriminative_subnetwork = DiscriminativeSubNetwork()

    def forward(self, batch):
        reconstruction = self.reconstructive_subnetwork(batch)
        prediction = self.discriminative_subnetwork(torch.cat([batch, reconstruction], dim=1))
        if self.training:
            return reconstruction, prediction
        return torch.softmax(prediction, dim=1)[:, 1]


def ssim(a, b, window=5, c1=0.01 ** 2, c2=0.03 ** 2):
    mu_a, mu_b = F.avg_pool2d(a, window, 1, window // 2), F.avg_pool2d(b, window, 1, window // 2)
    var_a = F.avg_pool2d(a * a, window, 1, window // 2) - mu_a ** 2
    var_b = F.avg_pool2d(b * b, window, 1, window // 2) - mu_b ** 2
    cov = F.avg_pool2d(a * b, window, 1, window // 2) - mu_a * mu_b
    return (((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a ** 2 + mu_b ** 2 + c1) * (var_a + var_b + c2))).mean()


class DraemLoss(nn.Module):
    def __init__(self, gamma=2.0, alpha=1.0):
        super().__init__()
        self.gamma, self.alpha = gamma, alpha

    def focal(self, logits, mask):
        logp = F.log_softmax(logits, dim=1).gather(1, mask.long())
        return (-self.alpha * (1 - logp.exp()) ** self.gamma * logp).mean()

    def forward(self, input_image, reconstruction, anomaly_mask, prediction):
        l2 = F.mse_loss(reconstruction, input_image)
        ssim_loss = 1 - ssim(reconstruction, input_image)
        return l2 + 2 * ssim_loss + self.focal(prediction, anomaly_mask)


class Draem(nn.Module):
    def __init__(self, seed=0):
        super().__init__()
        self.model = DraemModel()
        self.loss = DraemLoss()
        self.augmenter = Augmenter(generator=torch.Generator().manual_seed(seed))

    def training_step(self, batch, batch_idx):
        input_image = batch["image"]
        augmented_image, anomaly_mask = self.augmenter.augment_batch(input_image)
        reconstruction, prediction = self.model(augmented_image)
        loss = self.loss(input_image, reconstruction, anomaly_mask, prediction)
        return {"loss": loss}

    def test_step(self, batch, batch_idx):
        return {"anomaly_map": self.model(batch["image"]), "mask": batch["mask"]}

    def configure_optimizers(self):
        return torch.optim.Adam(self.model.parameters(), lr=1e-3)


class SurfaceDataModule:
    """Normal textured surfaces for training; surfaces with real defects (dents, stains) for testing."""

    def __init__(self, batch_size=16, normalization="imagenet", seed=0):
        self.batch_size, self.normalization = batch_size, normalization
        g = torch.Generator().manual_seed(seed)
        self.train_images = self.surfaces(320, g)
        test = self.surfaces(64, g)
        mask = (smooth_noise(64, 32, 4, g) > 0.72).float() * (torch.arange(64) % 2).view(-1, 1, 1, 1).float()
        defect = 0.35 * smooth_noise(64, 32, 8, g).expand(-1, 3, -1, -1) + 0.1
        self.test_images = test * (1 - mask) + defect * mask
        self.test_masks = mask

    @staticmethod
    def surfaces(n, g):
        base = torch.rand(n, 3, 1, 1, generator=g) * 0.3 + 0.45
        grain = 0.08 * torch.sin(torch.arange(32).float().view(1, 1, 1, 32) * (1.0 + torch.rand(n, 1, 1, 1, generator=g)))
        return (base + grain + 0.03 * torch.randn(n, 3, 32, 32, generator=g)).clamp(0, 1)

    def transform(self, images):
        if self.normalization == "imagenet":
            return (images - IMAGENET_MEAN) / IMAGENET_STD
        return images

    def train_dataloader(self):
        ds = TensorDataset(self.transform(self.train_images))
        return DataLoader(ds, batch_size=self.batch_size, shuffle=True, generator=torch.Generator().manual_seed(1))

    def test_dataloader(self):
        return DataLoader(TensorDataset(self.transform(self.test_images), self.test_masks), batch_size=32)


def auroc(scores, labels):
    order = scores.argsort()
    ranks = torch.empty_like(scores).scatter_(0, order, torch.arange(1, len(scores) + 1, dtype=scores.dtype))
    n_pos, n_neg = labels.sum(), (1 - labels).sum()
    return ((ranks[labels == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)).item()


def fit(module, datamodule, max_epochs):
    optimizer = module.configure_optimizers()
    for epoch in range(max_epochs):
        module.train()
        total = 0.0
        for batch_idx, (images,) in enumerate(datamodule.train_dataloader()):
            loss = module.training_step({"image": images}, batch_idx)["loss"]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch}: train_loss {total / (batch_idx + 1):.4f}")


def test(module, datamodule):
    module.eval()
    maps, masks = [], []
    with torch.no_grad():
        for batch_idx, (images, mask) in enumerate(datamodule.test_dataloader()):
            out = module.test_step({"image": images, "mask": mask}, batch_idx)
            maps.append(out["anomaly_map"].flatten())
            masks.append(out["mask"].flatten())
    print(f"pixel_AUROC {auroc(torch.cat(maps), torch.cat(masks)):.4f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    datamodule = SurfaceDataModule(batch_size=16)
    model = Draem()
    fit(model, datamodule, max_epochs=5)
    test(model, datamodule)
