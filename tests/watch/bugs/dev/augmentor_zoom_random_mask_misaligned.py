"""A binary segmentation training script that augments image/mask pairs with an
Augmentor-style pipeline: a ``Pipeline`` holds ``Operation`` objects (a left-right flip and
a ``ZoomRandom``), each applied with its own probability to the list ``[image, mask]`` so
that the ground truth follows the image, and a ``Dataset`` calls the pipeline in
``__getitem__``; a small encoder-decoder is trained with BCEWithLogitsLoss and validated
by IoU on un-augmented tiles. The bug is inside ``ZoomRandom.perform_operation``: the random
crop offsets are drawn inside the inner ``do(image)`` helper that is called once per image
in the list, so the photo and its mask are zoomed into different windows whenever the
operation fires. Nothing errors; the mask is simply shifted relative to the image for a
large share of the training samples, so the network learns blurred, displaced boundaries
and ends with a clearly lower validation IoU than with the offsets drawn once per call.

Thread: https://github.com/mdbloice/Augmentor/issues/209
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

SIZE = 32


class Operation:
    def __init__(self, probability):
        self.probability = probability

    def perform_operation(self, images):
        raise NotImplementedError


class Flip(Operation):
    def perform_operation(self, images):
        return [torch.flip(im, dims=[-1]) for im in images]


class ZoomRandom(Operation):
    """Zoom into a random window covering ``percentage_area`` of the image."""

    def __init__(self, probability, percentage_area, randomise=True):
        super().__init__(probability)
        self.percentage_area = percentage_area
        self.randomise = randomise

    def perform_operation(self, images):
        frac = random.uniform(0.5, self.percentage_area) if self.randomise else self.percentage_area
        h, w = images[0].shape[-2:]
        ch, cw = int(round(h * frac)), int(round(w * frac))

        def do(image):
            # BUG: the window position is drawn per image, so image and mask differ
            top = random.randint(0, h - ch)
            left = random.randint(0, w - cw)
            crop = image[..., top:top + ch, left:left + cw]
            mode = "nearest" if image.dtype == torch.uint8 else "bilinear"
            out = F.interpolate(crop[None].float(), size=(h, w), mode=mode,
                                **({} if mode == "nearest" else {"align_corners": False}))[0]
            return out.to(image.dtype)

        return [do(image) for image in images]


class Pipeline:
    def __init__(self):
        self.operations = []

    def flip_left_right(self, probability):
        self.operations.append(Flip(probability))

    def zoom_random(self, probability, percentage_area, randomise_percentage_area=True):
        self.operations.append(ZoomRandom(probability, percentage_area, randomise_percentage_area))

    def __call__(self, images):
        for op in self.operations:
            if random.uniform(0, 1) < op.probability:
                images = op.perform_operation(images)
        return images


def make_pair(g):
    yy, xx = torch.meshgrid(torch.arange(SIZE), torch.arange(SIZE), indexing="ij")
    mask = torch.zeros(SIZE, SIZE, dtype=torch.bool)
    for _ in range(int(torch.randint(2, 5, (1,), generator=g))):
        cy, cx = torch.randint(5, SIZE - 5, (2,), generator=g)
        r = float(torch.randint(2, 5, (1,), generator=g))
        mask |= (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
    img = 0.4 * torch.randn(1, SIZE, SIZE, generator=g) + mask.float()[None]
    return img, mask.to(torch.uint8)[None]


class SegDataset(Dataset):
    def __init__(self, n, seed, pipeline=None):
        g = torch.Generator().manual_seed(seed)
        self.pairs = [make_pair(g) for _ in range(n)]
        self.pipeline = pipeline

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, i):
        img, mask = self.pairs[i]
        if self.pipeline is not None:
            img, mask = self.pipeline([img, mask])
        return img, mask.float()


class TinyUNet(nn.Module):
    def __init__(self, w=16):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(1, w, 3, padding=1), nn.ReLU(), nn.Conv2d(w, w, 3, padding=1), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv2d(w, 2 * w, 3, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(2 * w, w, 2, stride=2)
        self.dec = nn.Sequential(nn.Conv2d(2 * w, w, 3, padding=1), nn.ReLU(), nn.Conv2d(w, 1, 1))

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        return self.dec(torch.cat([self.up(e2), e1], 1))


def iou(model, loader):
    model.eval()
    inter = union = 0.0
    with torch.no_grad():
        for img, mask in loader:
            pred = (torch.sigmoid(model(img)) > 0.5).float()
            inter += (pred * mask).sum().item()
            union += ((pred + mask) > 0).float().sum().item()
    model.train()
    return inter / max(union, 1.0)


def main():
    random.seed(0)
    torch.manual_seed(0)
    p = Pipeline()
    p.flip_left_right(probability=0.5)
    p.zoom_random(probability=0.8, percentage_area=0.75)

    train_ds = SegDataset(320, seed=1, pipeline=p)
    val_ds = SegDataset(128, seed=2)
    train_loader = DataLoader(train_ds, batch_size=16, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(val_ds, batch_size=64)

    model = TinyUNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    criterion = nn.BCEWithLogitsLoss()
    step = 0
    for epoch in range(8):
        total = 0.0
        for img, mask in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(img), mask)
            loss.backward()
            optimizer.step()
            total += loss.item()
            step += 1
        print(f"epoch {epoch + 1}  step {step:4d}  train loss {total / len(train_loader):.4f}"
              f"  val IoU {iou(model, val_loader):.3f}")


if __name__ == "__main__":
    main()
