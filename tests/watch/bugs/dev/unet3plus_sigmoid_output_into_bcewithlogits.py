"""A UNet-3+ style binary segmentation trainer (portrait/foreground masks): a ``UNet3Plus``
module whose ``forward`` fuses full-scale skip connections and ends with
``return F.sigmoid(d1)``; a ``BasicDataset`` of image/mask pairs split with ``random_split``;
and a ``train_net(net, device, epochs, batch_size, lr, ...)`` function that builds RMSprop
with a cosine LambdaLR, picks ``nn.BCEWithLogitsLoss()`` because ``n_classes == 1``, and
periodically runs ``eval_net`` for a validation Dice that thresholds
``torch.sigmoid(pred) > 0.5``. The bug: the network already returns probabilities, and the
loss applies a second sigmoid on top, so what the loss sees is squeezed into
(0.5, 0.73). The loss has a floor it can never get below and its gradient is tiny; the
logged loss creeps down a little and training runs to the end, but every pixel of
sigmoid(sigmoid(x)) is above 0.5, so the validation Dice is stuck at the value of
predicting foreground everywhere.

Thread: https://github.com/avBuffer/UNet3plus_pth/issues/23
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, random_split

SIZE = 32


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet3Plus(nn.Module):
    def __init__(self, n_channels=3, n_classes=1, f=(8, 16, 32)):
        super().__init__()
        self.n_channels, self.n_classes = n_channels, n_classes
        self.conv1 = conv_block(n_channels, f[0])
        self.conv2 = conv_block(f[0], f[1])
        self.conv3 = conv_block(f[1], f[2])
        cat = 8
        # decoder stage 2: fuse h1 (pooled), h2, h3 (upsampled)
        self.h1_hd2 = conv_block(f[0], cat)
        self.h2_hd2 = conv_block(f[1], cat)
        self.h3_hd2 = conv_block(f[2], cat)
        self.fuse2 = conv_block(3 * cat, 3 * cat)
        # decoder stage 1: fuse h1, hd2 (upsampled), h3 (upsampled)
        self.h1_hd1 = conv_block(f[0], cat)
        self.hd2_hd1 = conv_block(3 * cat, cat)
        self.h3_hd1 = conv_block(f[2], cat)
        self.fuse1 = conv_block(3 * cat, 3 * cat)
        self.outconv1 = nn.Conv2d(3 * cat, n_classes, 3, padding=1)

    def forward(self, x):
        h1 = self.conv1(x)
        h2 = self.conv2(F.max_pool2d(h1, 2))
        h3 = self.conv3(F.max_pool2d(h2, 2))
        hd2 = self.fuse2(torch.cat([
            self.h1_hd2(F.max_pool2d(h1, 2)),
            self.h2_hd2(h2),
            self.h3_hd2(F.interpolate(h3, scale_factor=2, mode="bilinear", align_corners=False)),
        ], 1))
        hd1 = self.fuse1(torch.cat([
            self.h1_hd1(h1),
            self.hd2_hd1(F.interpolate(hd2, scale_factor=2, mode="bilinear", align_corners=False)),
            self.h3_hd1(F.interpolate(h3, scale_factor=4, mode="bilinear", align_corners=False)),
        ], 1))
        d1 = self.outconv1(hd1)
        return F.sigmoid(d1)  # BUG: probabilities, but the training loss expects logits


class BasicDataset(Dataset):
    """Image/mask pairs; a bright blob on textured background is the foreground."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(SIZE), torch.arange(SIZE), indexing="ij")
        self.items = []
        for _ in range(n):
            cy, cx = torch.randint(8, SIZE - 8, (2,), generator=g)
            ry, rx = torch.randint(4, 9, (2,), generator=g).float()
            mask = (((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1).float()
            img = 0.5 * torch.randn(3, SIZE, SIZE, generator=g)
            img += mask * torch.tensor([0.9, 0.6, 0.3]).view(3, 1, 1)
            self.items.append({"image": img, "mask": mask[None]})

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def dice_coeff(pred, target, eps=1e-6):
    inter = (pred * target).sum()
    return (2 * inter + eps) / (pred.sum() + target.sum() + eps)


def eval_net(net, loader, device):
    net.eval()
    tot, n = 0.0, 0
    with torch.no_grad():
        for batch in loader:
            imgs = batch["image"].to(device)
            true_masks = batch["mask"].to(device)
            mask_pred = net(imgs)
            pred = (torch.sigmoid(mask_pred) > 0.5).float()
            tot += dice_coeff(pred, true_masks).item()
            n += 1
    net.train()
    return tot / max(n, 1)


def train_net(net, device, epochs=8, batch_size=8, lr=1e-3, val_percent=0.2):
    dataset = BasicDataset(200, seed=1)
    n_val = int(len(dataset) * val_percent)
    n_train = len(dataset) - n_val
    train, val = random_split(dataset, [n_train, n_val], generator=torch.Generator().manual_seed(0))
    train_loader = DataLoader(train, batch_size=batch_size, shuffle=True,
                              generator=torch.Generator().manual_seed(1))
    val_loader = DataLoader(val, batch_size=batch_size, shuffle=False)

    optimizer = torch.optim.RMSprop(net.parameters(), lr=lr, weight_decay=1e-8)
    def cosine_factor(e):
        return 0.05 + 0.95 * 0.5 * (1.0 + math.cos(math.pi * e / epochs))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=cosine_factor)
    criterion = nn.CrossEntropyLoss() if net.n_classes > 1 else nn.BCEWithLogitsLoss()

    global_step = 0
    for epoch in range(epochs):
        net.train()
        epoch_loss = 0.0
        for batch in train_loader:
            imgs = batch["image"].to(device=device, dtype=torch.float32)
            true_masks = batch["mask"].to(device=device, dtype=torch.float32)
            masks_pred = net(imgs)
            loss = criterion(masks_pred, true_masks)
            epoch_loss += loss.item()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            global_step += 1
        val_score = eval_net(net, val_loader, device)
        print(f"epoch {epoch + 1}  step {global_step:4d}  lr {optimizer.param_groups[0]['lr']:.2e}"
              f"  loss {epoch_loss / len(train_loader):.4f}  val Dice {val_score:.3f}")
        scheduler.step()


def main():
    torch.manual_seed(0)
    device = torch.device("cpu")
    net = UNet3Plus(n_channels=3, n_classes=1).to(device)
    train_net(net, device)


if __name__ == "__main__":
    main()
