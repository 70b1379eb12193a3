"""Healthy look-alike of normalization-mismatch: fine-tuning a "pretrained" CNN with its BatchNorm
layers frozen in eval mode (detection-style freeze_bn, for small batches) and strong colour
jitter on the training images. The jittered images are scaled to [0, 1] and normalized with the
ImageNet statistics the checkpoint was fitted to; the jitter moves them around that scale, not
off it."""
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
    return net


def freeze_bn(model):
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.eval()


class Photos(Dataset):
    def __init__(self, n=640, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 4, (n,), generator=g)
        tint = torch.tensor([[200.0, 40, 40], [40, 200, 40], [40, 40, 200], [150, 150, 60]])
        self.images = (tint[self.labels].view(n, 3, 1, 1) + 40 * torch.randn(n, 3, 24, 24, generator=g)).clamp(0, 255)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.prepare(self.images[i]), self.labels[i]

    def prepare(self, image):
        gain = 0.6 + 0.8 * torch.rand(3, 1, 1)
        shift = 30 * torch.randn(3, 1, 1)
        jittered = (image * gain + shift).clamp(0, 255)
        return (jittered.round() / 255.0 - MEAN[0]) / STD[0]


class FeatureProbe(nn.Module):
    def __init__(self, backbone, classes=4):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(32, classes)

    def forward(self, images):
        return self.head(self.backbone(images))


def main():
    probe = FeatureProbe(pretrained_backbone())
    optimizer = torch.optim.Adam(probe.parameters(), lr=1e-3)
    probe.train()
    freeze_bn(probe)
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
