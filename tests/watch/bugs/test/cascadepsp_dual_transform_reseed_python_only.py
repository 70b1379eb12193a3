"""A segmentation-refinement training script: an OnlineTransformDataset loads an image and its
ground-truth mask, applies a random crop + horizontal flip to each through two separate
"dual" transform pipelines, derives a perturbed coarse mask from the ground truth, and returns
(im, seg, gt); a script-level loop feeds cat(im, seg) to a refinement net, computes the loss and
IoU in a compute_loss_and_metrics() helper, and steps Adam and a MultiStepLR every iteration.
To give image and mask the same crop and flip, __getitem__ calls random.seed(seed) before each of
the two pipelines, but the transforms draw their randomness from torch's generator (as the
torchvision transforms do since 0.7), which the reseed does not touch; image and ground truth get
independent crops and flips, so many training pairs have the object and its mask misaligned.

Thread: https://github.com/hkchengrex/CascadePSP/issues/17
"""
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class RandomCrop:
    def __init__(self, size, pad_if_needed=True):
        self.size, self.pad_if_needed = size, pad_if_needed

    def __call__(self, img):
        h, w = img.shape[-2:]
        if self.pad_if_needed and (h < self.size or w < self.size):
            img = F.pad(img, (0, max(0, self.size - w), 0, max(0, self.size - h)))
            h, w = img.shape[-2:]
        i = int(torch.randint(0, h - self.size + 1, (1,)))
        j = int(torch.randint(0, w - self.size + 1, (1,)))
        return img[..., i:i + self.size, j:j + self.size]


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        return img.flip(-1) if torch.rand(1) < self.p else img


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


def normalize(x, mean, std):
    return (x - torch.tensor(mean).view(-1, 1, 1)) / torch.tensor(std).view(-1, 1, 1)


def modify_boundary(gt_np, rng):
    """Coarse input mask: the ground truth shifted and dilated/eroded by a pixel or two."""
    seg = np.roll(gt_np, shift=(rng.randint(-2, 3), rng.randint(-2, 3)), axis=(0, 1))
    t = torch.from_numpy(seg)[None, None].float()
    if rng.rand() < 0.5:
        t = F.max_pool2d(t, 3, 1, 1)
    else:
        t = -F.max_pool2d(-t, 3, 1, 1)
    return t[0]


class OnlineTransformDataset(Dataset):
    def __init__(self, n, seed, size=40, crop=32):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
        cx = torch.rand(n, generator=g) * 16 + 8
        cy = torch.rand(n, generator=g) * 20 + 10
        ax = torch.rand(n, generator=g) * 5 + 4
        ay = torch.rand(n, generator=g) * 6 + 5
        self.gts = ((((xx - cx[:, None, None]) / ax[:, None, None]) ** 2
                     + ((yy - cy[:, None, None]) / ay[:, None, None]) ** 2) < 1).float().unsqueeze(1)
        colour = torch.rand(n, 3, 1, 1, generator=g) * 0.5 + 0.5
        background = torch.rand(n, 3, 1, 1, generator=g) * 0.4
        self.ims = (self.gts * colour + (1 - self.gts) * background
                    + 0.05 * torch.randn(n, 3, size, size, generator=g)).clamp(0, 1)

        self.bilinear_dual_transform = Compose([RandomCrop(crop), RandomHorizontalFlip()])
        self.bilinear_dual_transform_im = Compose([RandomCrop(crop), RandomHorizontalFlip()])

    def __getitem__(self, idx):
        im, gt = self.ims[idx], self.gts[idx]

        seed = np.random.randint(2147483647)
        random.seed(seed)
        im = self.bilinear_dual_transform_im(im)
        random.seed(seed)
        gt = self.bilinear_dual_transform(gt)

        seg = modify_boundary(gt[0].numpy(), np.random)
        im = normalize(im, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
        seg = normalize(seg, [0.5], [0.5])
        return im, seg, gt

    def __len__(self):
        return len(self.ims)


class RefinementNet(nn.Module):
    def __init__(self, ch=24):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(4, ch, 3, 1, 1), nn.BatchNorm2d(ch), nn.ReLU(),
            nn.Conv2d(ch, ch, 3, 1, 2, dilation=2), nn.BatchNorm2d(ch), nn.ReLU(),
            nn.Conv2d(ch, ch, 3, 1, 1), nn.BatchNorm2d(ch), nn.ReLU(),
            nn.Conv2d(ch, 1, 1))

    def forward(self, im, seg):
        return {"pred_logits": self.body(torch.cat([im, seg], 1))}


def compute_loss_and_metrics(images):
    logits, gt = images["pred_logits"], images["gt"]
    prob = torch.sigmoid(logits)
    loss = F.binary_cross_entropy_with_logits(logits, gt) + F.l1_loss(prob, gt)
    pred = (prob > 0.5).float()
    inter = (pred * gt).sum()
    union = ((pred + gt) > 0).float().sum().clamp(min=1)
    return {"total_loss": loss, "iou": inter / union}


def main():
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    para = {"lr": 1e-3, "weight_decay": 1e-4, "batch_size": 8, "iterations": 75, "steps": [50], "gamma": 0.1}
    model = RefinementNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=para["lr"], weight_decay=para["weight_decay"])
    train_dataset = OnlineTransformDataset(200, seed=1)
    train_loader = DataLoader(train_dataset, para["batch_size"], shuffle=True, drop_last=True,
                              generator=torch.Generator().manual_seed(0))
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, para["steps"], para["gamma"])

    total_epoch = int(para["iterations"] / len(train_loader) + 0.5)
    total_iter = 0
    for e in range(total_epoch):
        model = model.train()
        for im, seg, gt in train_loader:
            total_iter += 1
            images = model(im, seg)
            images["gt"] = gt
            loss_and_metrics = compute_loss_and_metrics(images)

            optimizer.zero_grad()
            loss_and_metrics["total_loss"].backward()
            optimizer.step()

            if total_iter % 10 == 0:
                print(f"iter {total_iter} epoch {e} loss {loss_and_metrics['total_loss'].item():.4f} "
                      f"iou {loss_and_metrics['iou'].item():.3f} lr {scheduler.get_last_lr()[0]:.1e}")
            scheduler.step()


if __name__ == "__main__":
    main()
