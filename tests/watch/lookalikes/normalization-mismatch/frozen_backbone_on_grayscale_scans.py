"""Healthy look-alike of normalization-mismatch: a frozen "pretrained" CNN (BatchNorm statistics
settled on [0, 1] colour images normalized with the ImageNet mean and std) probed on another
domain, grayscale scans replicated to three channels, dark and low in contrast. The scans are
scaled to [0, 1] and normalized with the same ImageNet statistics, as the checkpoint expects:
their statistics differ from the pretraining images' (a new domain), but they are on the scale
the network was fitted to, a few standard deviations at most."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def pretrained_backbone():
    torch.manual_seed(21)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten())
    g = torch.Generator().manual_seed(22)
    with torch.no_grad():
        for _ in range(40):
            net((torch.rand(32, 3, 24, 24, generator=g) - MEAN) / STD)
    for p in net.parameters():
        p.requires_grad_(False)
    return net.eval()


class Photos(Dataset):
    def __init__(self, n=640, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 4, (n,), generator=g)
        level = torch.tensor([30.0, 55, 80, 105])[self.labels].view(n, 1, 1, 1)
        gray = (level + 12 * torch.randn(n, 1, 24, 24, generator=g)).clamp(0, 255)
        self.images = gray.expand(n, 3, 24, 24).clone()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.prepare(self.images[i]), self.labels[i]

    def prepare(self, image):
        return (image.round() / 255.0 - MEAN[0]) / STD[0]


class FeatureProbe(nn.Module):
    def __init__(self, backbone, classes=4):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(32, classes)

    def forward(self, images):
        with torch.no_grad():
            features = self.backbone(images)
        return self.head(features)


def main():
    probe = FeatureProbe(pretrained_backbone())
    optimizer = torch.optim.Adam(probe.head.parameters(), lr=1e-2)
    loader = DataLoader(Photos(), batch_size=32, shuffle=True)
    for epoch in range(3):
        for images, labels in loader:
            loss = F.cross_entropy(probe(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
