"""A semantic-segmentation training script on a custom dataset whose label masks are
single-channel 8-bit images holding class ids 0..NUM_CLASSES-1. The ``Dataset`` takes an
image ``transform`` and a ``target_transform``, and both are built from the usual
torchvision-style ``Compose([..., ToTensor()])``; the training loop feeds the model output
and ``target.squeeze(1).long()`` to ``CrossEntropyLoss`` and reports loss, pixel accuracy
and mIoU each epoch. The bug is ``ToTensor`` in the target pipeline: for uint8 input it
rescales [0, 255] to [0, 1], so a class id k becomes k/255, and ``.long()`` truncates every
one of those back to 0. Every training and validation pixel is labelled background; the
loss drops quickly towards zero and pixel accuracy looks high, while the network never
learns any foreground class and the mIoU stays near 1/NUM_CLASSES. Replacing the target
conversion with a plain ``torch.as_tensor(np.array(mask), dtype=torch.int64)`` trains
normally.

Thread: https://github.com/pytorch/vision/issues/2497
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

NUM_CLASSES = 4
SIZE = 24


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class ToTensor:
    """Stand-in for torchvision's ToTensor: HWC or HW uint8 array -> float CHW in [0, 1]."""

    def __call__(self, pic):
        arr = np.asarray(pic)
        if arr.ndim == 2:
            arr = arr[:, :, None]
        t = torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))
        if t.dtype == torch.uint8:
            return t.float().div(255)
        return t.float()


class Normalize:
    def __init__(self, mean, std):
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, t):
        return (t - self.mean) / self.std


def make_sample(rng):
    label = np.zeros((SIZE, SIZE), dtype=np.uint8)
    img = rng.integers(60, 120, size=(SIZE, SIZE, 3)).astype(np.int32)
    colors = {1: (220, 60, 60), 2: (60, 220, 60), 3: (60, 60, 220)}
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    for _ in range(rng.integers(2, 5)):
        cls = int(rng.integers(1, NUM_CLASSES))
        cy, cx = rng.integers(3, SIZE - 3, size=2)
        r = int(rng.integers(2, 5))
        m = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
        label[m] = cls
        img[m] = np.array(colors[cls]) + rng.integers(-30, 30, size=(int(m.sum()), 3))
    return np.clip(img, 0, 255).astype(np.uint8), label


class CustomSegmentationDataset(Dataset):
    def __init__(self, n, seed, transform=None, target_transform=None):
        rng = np.random.default_rng(seed)
        self.samples = [make_sample(rng) for _ in range(n)]
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        image, mask = self.samples[i]
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            mask = self.target_transform(mask)  # BUG: ToTensor rescales class ids to k/255
        return image, mask


class SegNet(nn.Module):
    def __init__(self, w=24):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(),
            nn.Conv2d(w, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(),
            nn.Conv2d(w, NUM_CLASSES, 1),
        )

    def forward(self, x):
        return self.net(x)


def evaluate(model, loader):
    model.eval()
    conf = torch.zeros(NUM_CLASSES, NUM_CLASSES, dtype=torch.long)
    with torch.no_grad():
        for img, target in loader:
            target = target.squeeze(1).long()
            pred = model(img).argmax(1)
            conf += torch.bincount(target.flatten() * NUM_CLASSES + pred.flatten(),
                                   minlength=NUM_CLASSES ** 2).view(NUM_CLASSES, NUM_CLASSES)
    model.train()
    inter = conf.diag().float()
    union = conf.sum(0).float() + conf.sum(1).float() - inter
    miou = (inter / union.clamp(min=1)).mean().item()
    acc = (inter.sum() / conf.sum()).item()
    return acc, miou


def main():
    torch.manual_seed(0)
    transform = Compose([ToTensor(), Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])])
    target_transform = Compose([ToTensor()])
    train_ds = CustomSegmentationDataset(320, 1, transform, target_transform)
    val_ds = CustomSegmentationDataset(96, 2, transform, target_transform)
    train_loader = DataLoader(train_ds, batch_size=16, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(val_ds, batch_size=48)

    model = SegNet()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step = 0
    for epoch in range(8):
        total = 0.0
        for img, target in train_loader:
            out = model(img)
            loss = criterion(out, target.squeeze(1).long())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            step += 1
        acc, miou = evaluate(model, val_loader)
        print(f"epoch {epoch + 1}  step {step:4d}  loss {total / len(train_loader):.4f}"
              f"  val pixel acc {acc:.3f}  val mIoU {miou:.3f}")


if __name__ == "__main__":
    main()
