"""A frozen-backbone benchmark for satellite image classification: a PatchBenchModel wraps a
"pretrained" RGB CNN (trained on [0, 1] images normalised with ImageNet mean/std, BatchNorm in eval
mode), normalize_inputs() prepares each batch according to input_normalization, features are the
pooled backbone output, and a linear probe is trained on them with Adam and cross-entropy.

The "imagenet" mode applies (x - mean) / std with the ImageNet RGB statistics straight to the
raw tensor. For natural images that is merely a missing /255, but these are Sentinel-2 style digital
numbers in the hundreds to thousands (up to ~28000), so the backbone receives inputs in the
thousands instead of the unit range it was trained on and the probe fits features that no longer
mean anything. The fix rescales each band to [0, 1] with the dataset's band min/max first.

Thread: https://github.com/torchgeo/torchgeo-bench/pull/40
"""
import torch
import torch.nn.functional as F
from torch import nn

IMAGENET_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
IMAGENET_STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
BAND_MIN, BAND_MAX = torch.zeros(3), torch.full((3,), 28000.0)
NUM_CLASSES = 5


def make_pretrained_backbone():
    """Stands in for a downloaded RGB checkpoint: random convolutions whose BatchNorm statistics were
    settled on ImageNet-normalised [0, 1] images."""
    torch.manual_seed(7)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten())
    net.train()
    g = torch.Generator().manual_seed(8)
    with torch.no_grad():
        for _ in range(30):
            rgb = torch.rand(64, 3, 32, 32, generator=g)
            net((rgb - IMAGENET_MEAN) / IMAGENET_STD)
    net.eval()
    for p in net.parameters():
        p.requires_grad_(False)
    return net


class PatchBenchModel(nn.Module):
    def __init__(self, backbone, input_normalization="imagenet"):
        super().__init__()
        self.backbone = backbone
        self.input_normalization = input_normalization
        self.register_buffer("_rgb_mean", IMAGENET_MEAN.clone())
        self.register_buffer("_rgb_std", IMAGENET_STD.clone())

    def normalize_inputs(self, images):
        if self.input_normalization == "imagenet":
            return (images - self._rgb_mean) / self._rgb_std
        if self.input_normalization == "none":
            return images
        raise ValueError(self.input_normalization)

    @torch.no_grad()
    def forward_features(self, images):
        return self.backbone(self.normalize_inputs(images))


def eurosat_like(n, seed):
    """Raw digital numbers: class-specific band brightness and texture, values mostly 300-6000."""
    g = torch.Generator().manual_seed(seed)
    base = torch.tensor([[600., 900., 700.], [300., 450., 800.], [1800., 1700., 1600.],
                         [1200., 1000., 900.], [2600., 2400., 2300.]])
    y = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    freq = (y.float() + 1)[:, None, None]
    grid = torch.arange(32).float()
    stripes = torch.sin(grid[None, :, None] * freq / 3) * torch.cos(grid[None, None, :] * freq / 5)
    x = base[y][:, :, None, None] * (1 + 0.25 * stripes[:, None])
    x = x + 150 * torch.randn(n, 3, 32, 32, generator=g)
    return x.clamp(BAND_MIN.min().item(), BAND_MAX.max().item()), y


def train_linear_probe(model, train, val, epochs=4, batch_size=32, lr=1e-3):
    x_tr, y_tr = train
    feats_tr = torch.cat([model.forward_features(x_tr[i:i + 256]) for i in range(0, len(x_tr), 256)])
    feats_va = model.forward_features(val[0])
    probe = nn.Linear(feats_tr.shape[1], NUM_CLASSES)
    optimizer = torch.optim.Adam(probe.parameters(), lr=lr)
    g = torch.Generator().manual_seed(0)
    for epoch in range(epochs):
        order = torch.randperm(len(y_tr), generator=g)
        for i in range(0, len(order), batch_size):
            idx = order[i:i + batch_size]
            loss = F.cross_entropy(probe(feats_tr[idx]), y_tr[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            acc = (probe(feats_va).argmax(1) == val[1]).float().mean().item()
        print(f"epoch {epoch} probe_loss {loss.item():.4f} val_acc {acc:.3f}")
    return probe


def main():
    torch.manual_seed(0)
    model = PatchBenchModel(make_pretrained_backbone(), input_normalization="imagenet")
    train_linear_probe(model, eurosat_like(640, seed=1), eurosat_like(320, seed=2))


if __name__ == "__main__":
    main()
