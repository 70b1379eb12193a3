"""A U-Net segmentation script in the style of a "nest of U-Nets" repository: a folder Dataset holds
one torchvision-like Compose for the images (centre crop, random rotation of -10..10 degrees,
brightness jitter, normalisation) and another for the label maps (centre crop, to tensor), split
into train and validation with two SubsetRandomSamplers. A plain epoch loop with Adam, a cosine
schedule, a BCE + Dice loss (calc_loss) and model.eval() validation.
The random rotation sits only in the image pipeline, and the two pipelines are called separately,
so every training image is turned by its own random angle while its label map is not: the lesion
drawn in the mask no longer lies on the lesion in the image.

Thread: https://github.com/bigmb/Unet-Segmentation-Pytorch-Nest-of-Unets/pull/30
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.sampler import SubsetRandomSampler


class CenterCrop:
    def __init__(self, size):
        self.size = size

    def __call__(self, x):
        h, w = x.shape[-2:]
        top, left = (h - self.size) // 2, (w - self.size) // 2
        return x[..., top:top + self.size, left:left + self.size]


class RandomRotation:
    """Rotate by an angle drawn from torch's global generator, like the torchvision transform."""

    def __init__(self, degrees):
        self.degrees = degrees

    def __call__(self, x):
        lo, hi = self.degrees
        angle = math.radians(float(torch.empty(1).uniform_(lo, hi)))
        c, s = math.cos(angle), math.sin(angle)
        theta = torch.tensor([[c, -s, 0.0], [s, c, 0.0]]).unsqueeze(0)
        grid = F.affine_grid(theta, (1,) + tuple(x.shape), align_corners=False)
        return F.grid_sample(x.unsqueeze(0), grid, align_corners=False).squeeze(0)


class BrightnessJitter:
    def __init__(self, amount):
        self.amount = amount

    def __call__(self, x):
        return x * float(torch.empty(1).uniform_(1 - self.amount, 1 + self.amount))


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, x):
        return (x - self.mean) / self.std


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class ImagesDatasetFolder(Dataset):
    def __init__(self, images, labels, transform_i=None, transform_m=None):
        self.images, self.labels = images, labels
        self.tx = transform_i or Compose([CenterCrop(32), RandomRotation((-10, 10)),
                                          BrightnessJitter(0.4), Normalize(0.5, 0.5)])
        self.lx = transform_m or Compose([CenterCrop(32)])

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.tx(self.images[i]), self.lx(self.labels[i])


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


class U_Net(nn.Module):
    def __init__(self, in_ch=3, out_ch=1):
        super().__init__()
        self.conv1, self.conv2 = conv_block(in_ch, 8), conv_block(8, 16)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.conv3 = conv_block(16, 8)
        self.out = nn.Conv2d(8, out_ch, 1)

    def forward(self, x):
        e1 = self.conv1(x)
        e2 = self.conv2(F.max_pool2d(e1, 2))
        return self.out(self.conv3(torch.cat([e1, self.up(e2)], 1)))


def dice_loss(prediction, target, smooth=1.0):
    inter = (prediction.reshape(-1) * target.reshape(-1)).sum()
    return 1 - (2 * inter + smooth) / (prediction.sum() + target.sum() + smooth)


def calc_loss(prediction, target, bce_weight=0.5):
    bce = F.binary_cross_entropy_with_logits(prediction, target)
    dice = dice_loss(torch.sigmoid(prediction), target)
    return bce * bce_weight + dice * (1 - bce_weight)


def lesion_folder(n, seed, size=40):
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    r = torch.rand(n, generator=g) * 5 + 8
    phi = torch.rand(n, generator=g) * 2 * math.pi
    cy, cx = size / 2 + r * torch.sin(phi), size / 2 + r * torch.cos(phi)
    rad = torch.rand(n, generator=g) * 1.5 + 2.5
    dist = ((yy - cy[:, None, None]) ** 2 + (xx - cx[:, None, None]) ** 2).sqrt()
    masks = (dist < rad[:, None, None]).float().unsqueeze(1)
    tint = torch.tensor([0.6, 0.3, 0.2]).view(1, 3, 1, 1)
    images = 0.3 + tint * masks + 0.12 * torch.randn(n, 3, size, size, generator=g)
    return images, masks


def main():
    torch.manual_seed(0)
    np.random.seed(0)
    batch_size, valid_size, epochs = 4, 0.15, 2
    images, labels = lesion_folder(280, seed=1)
    training_data = ImagesDatasetFolder(images, labels)
    indices = list(range(len(training_data)))
    split = int(np.floor(valid_size * len(indices)))
    np.random.shuffle(indices)
    train_idx, valid_idx = indices[split:], indices[:split]
    train_loader = DataLoader(training_data, batch_size=batch_size, sampler=SubsetRandomSampler(train_idx))
    valid_loader = DataLoader(training_data, batch_size=batch_size, sampler=SubsetRandomSampler(valid_idx))

    model = U_Net(3, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=int(1e10), eta_min=1e-5)
    for i in range(epochs):
        train_loss, valid_loss = 0.0, 0.0
        model.train()
        for x, y in train_loader:
            opt.zero_grad()
            y_pred = model(x)
            loss = calc_loss(y_pred, y)
            train_loss += loss.item() * x.size(0)
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            for x1, y1 in valid_loader:
                valid_loss += calc_loss(model(x1), y1).item() * x1.size(0)
        scheduler.step()
        print(f"Epoch: {i + 1}/{epochs} Training Loss: {train_loss / len(train_idx):.4f} "
              f"Validation Loss: {valid_loss / len(valid_idx):.4f}")


if __name__ == "__main__":
    main()
