"""A binary-segmentation U-Net trainer in the Pytorch-UNet style: train_net(net, epochs,
batch_size, lr, ...) splits image ids into train and val, rebuilds generators of
(image, mask) pairs every epoch, groups the training pairs with a batch() helper, and
optimises BCELoss on the flattened sigmoid output with SGD (momentum 0.9); after each epoch
it calls eval_net(net, val) which feeds the validation images one at a time and averages a
Dice coefficient. Neither function ever switches the network's mode: eval_net runs the
U-Net (BatchNorm after every convolution) in training mode, so each validation image is
normalised with its own one-image batch statistics instead of the running averages, and the
running statistics are overwritten with validation images. The printed "Validation Dice
Coeff" therefore does not measure the model that is saved and later used: images with little
or no foreground get their faint activations stretched to full scale and come back with
spurious masks.

Thread: https://github.com/milesial/Pytorch-UNet/issues/31
"""
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

SIZE = 32


class DoubleConv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    def forward(self, x):
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, n_channels=3, n_classes=1):
        super().__init__()
        self.inc = DoubleConv(n_channels, 16)
        self.down1 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(16, 32))
        self.down2 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(32, 32))
        self.up1 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv_up1 = DoubleConv(64, 16)
        self.up2 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv_up2 = DoubleConv(32, 16)
        self.outc = nn.Conv2d(16, n_classes, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x = self.conv_up1(torch.cat([self.up1(x3), x2], 1))
        x = self.conv_up2(torch.cat([self.up2(x), x1], 1))
        return self.outc(x)


def dice_coeff(pred, target, eps=1e-4):
    inter = (pred * target).sum()
    return (2 * inter + eps) / (pred.sum() + target.sum() + eps)


# --- stand-ins for the data utilities (no files: every id renders a synthetic image) ---
def render(img_id):
    rng = np.random.RandomState(img_id)
    img = rng.randn(3, SIZE, SIZE).astype(np.float32) * 0.4
    mask = np.zeros((SIZE, SIZE), dtype=np.float32)
    yy, xx = np.mgrid[:SIZE, :SIZE]
    for _ in range(rng.randint(0, 3)):
        cy, cx = rng.randint(4, SIZE - 4, 2)
        r = rng.randint(2, 8)
        blob = (yy - cy) ** 2 + (xx - cx) ** 2 < r * r
        mask[blob] = 1.0
    img += mask[None] * np.array([0.8, 0.5, 0.3], dtype=np.float32)[:, None, None]
    return img, mask


def get_ids(n):
    return list(range(n))


def split_train_val(ids, val_percent):
    ids = list(ids)
    random.shuffle(ids)
    n = int(len(ids) * val_percent)
    return {"train": ids[:-n], "val": ids[-n:]}


def get_imgs_and_masks(ids):
    for i in ids:
        yield render(i)


def batch(iterable, batch_size):
    b = []
    for item in iterable:
        b.append(item)
        if len(b) == batch_size:
            yield b
            b = []
    if b:
        yield b


def eval_net(net, dataset):
    """Dice on the validation pairs, one image at a time."""
    tot, n = 0.0, 0
    for img, true_mask in dataset:
        img = torch.from_numpy(img).unsqueeze(0)
        true_mask = torch.from_numpy(true_mask).unsqueeze(0)
        with torch.no_grad():
            mask_pred = net(img)[0]
        mask_pred = (torch.sigmoid(mask_pred) > 0.5).float()
        tot += dice_coeff(mask_pred, true_mask).item()
        n += 1
    return tot / n


def train_net(net, epochs=5, batch_size=10, lr=0.1, val_percent=0.1):
    iddataset = split_train_val(get_ids(440), val_percent)
    n_train = len(iddataset["train"])
    print(f"Starting training: epochs {epochs}, batch size {batch_size}, lr {lr}, "
          f"train {n_train}, val {len(iddataset['val'])}")
    optimizer = optim.SGD(net.parameters(), lr=lr, momentum=0.9, weight_decay=0.0005)
    criterion = nn.BCELoss()
    for epoch in range(epochs):
        random.shuffle(iddataset["train"])
        train = get_imgs_and_masks(iddataset["train"])
        val = get_imgs_and_masks(iddataset["val"])
        epoch_loss, n_batches = 0.0, 0
        for b in batch(train, batch_size):
            imgs = torch.from_numpy(np.array([p[0] for p in b]).astype(np.float32))
            true_masks = torch.from_numpy(np.array([p[1] for p in b]))
            masks_pred = net(imgs)
            masks_probs_flat = torch.sigmoid(masks_pred).view(-1)
            loss = criterion(masks_probs_flat, true_masks.view(-1))
            epoch_loss += loss.item()
            n_batches += 1
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"Epoch {epoch + 1}/{epochs} finished ! Loss: {epoch_loss / n_batches:.4f}")
        val_dice = eval_net(net, val)
        print(f"  Validation Dice Coeff: {val_dice:.4f}")


def main():
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    net = UNet(n_channels=3, n_classes=1)
    train_net(net, epochs=5, batch_size=10, lr=0.1)


if __name__ == "__main__":
    main()
