"""A frozen-backbone benchmark for multispectral satellite classification. BenchModel.normalize_inputs
z-scores each band with the dataset's BandSpec mean/std (given in raw Sentinel-2 digital numbers);
the subclass TorchGeoBackboneBench overrides it to first convert the input unit to the one the
backbone's weights expect (digital numbers / 10000 -> reflectance) and then calls the parent. The
frozen "pretrained" multispectral backbone produces pooled features and a logistic-regression probe
is trained on them with Adam.

For a backbone without its own normalisation layer the conversion should be skipped: dividing by
10000 and then z-scoring with statistics in digital numbers turns every pixel into roughly
(0.1 - 1500) / 600, about -2.5 in every band with the image content squeezed into the fourth
decimal. The backbone sees near-constant inputs, the features carry almost no information and the
probe ends near chance, without any error.

Thread: https://github.com/torchgeo/torchgeo-bench/pull/103
"""
import torch
import torch.nn.functional as F
from torch import nn

BAND_MEAN = torch.tensor([1400., 1300., 1250., 2300., 1900., 1500.])
BAND_STD = torch.tensor([600., 550., 650., 900., 800., 700.])
NUM_CLASSES = 6


def convert_unit(images, source, target):
    if source == "s2_dn" and target == "reflectance":
        return images / 10000.0
    return images


class BenchModel(nn.Module):
    def __init__(self, band_mean, band_std):
        super().__init__()
        self.register_buffer("band_mean", band_mean.view(1, -1, 1, 1))
        self.register_buffer("band_std", band_std.view(1, -1, 1, 1))

    def normalize_inputs(self, images):
        return (images - self.band_mean) / self.band_std


class TorchGeoBackboneBench(BenchModel):
    def __init__(self, backbone, band_mean, band_std, dataset_unit="s2_dn", weights_unit="reflectance"):
        super().__init__(band_mean, band_std)
        self.backbone = backbone
        self.dataset_unit, self.weights_unit = dataset_unit, weights_unit

    def normalize_inputs(self, images):
        images = convert_unit(images, self.dataset_unit, self.weights_unit)
        return super().normalize_inputs(images)

    @torch.no_grad()
    def forward_features(self, images):
        return self.backbone(self.normalize_inputs(images))


def make_pretrained_backbone(bands=6):
    """Stands in for a downloaded multispectral checkpoint trained on z-scored inputs."""
    torch.manual_seed(11)
    net = nn.Sequential(nn.Conv2d(bands, 32, 4, stride=4), nn.GELU(),
                        nn.Conv2d(32, 64, 3, padding=1), nn.GELU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(64))
    net.eval()
    for p in net.parameters():
        p.requires_grad_(False)
    return net


def sentinel_patches(n, seed):
    g = torch.Generator().manual_seed(seed)
    spectra = BAND_MEAN + BAND_STD * torch.randn(NUM_CLASSES, 6, generator=torch.Generator().manual_seed(3))
    y = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    x = spectra[y][:, :, None, None] * (1 + 0.1 * torch.rand(n, 1, 16, 16, generator=g))
    x = x + 120 * torch.randn(n, 6, 16, 16, generator=g)
    return x.clamp(min=0), y


def logistic_probe(model, train, val, epochs=5, batch_size=32, lr=1e-2):
    feats_tr, y_tr = model.forward_features(train[0]), train[1]
    feats_va, y_va = model.forward_features(val[0]), val[1]
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
            acc = (probe(feats_va).argmax(1) == y_va).float().mean().item()
        print(f"epoch {epoch} probe_loss {loss.item():.4f} val_acc {acc:.3f}")


def main():
    torch.manual_seed(0)
    model = TorchGeoBackboneBench(make_pretrained_backbone(), BAND_MEAN, BAND_STD)
    logistic_probe(model, sentinel_patches(480, seed=1), sentinel_patches(240, seed=2))


if __name__ == "__main__":
    main()
