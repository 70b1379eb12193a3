"""A geospatial semantic-segmentation pipeline in the style of a small library: a
``SemanticSegmentationDataset`` whose ``__getitem__`` loads an image tile and its label
mask and normalizes the mask, and a ``train_segmentation_model()`` helper that builds the
DataLoaders, a ``CrossEntropyLoss`` and an Adam optimizer, runs the epoch loop and reports
IoU / F1 on a validation split. Label rasters mark no-data / unannotated pixels with -100,
PyTorch's default ignore value. The bug is in the label normalization of the multi-class
branch: the mask is clipped to the range ``[0, num_classes - 1]``, so every -100
pixel silently becomes class 0 (background) before it reaches the loss. The loss was meant
to skip those pixels (CrossEntropyLoss ignores -100 by default) but never sees the sentinel
any more, so the large unannotated areas, which contain real objects, are trained as
background, and the validation metrics score those pixels as background too. Training runs
to the end and the reported validation numbers look reasonable, while the model has learned
to erase objects: its IoU for the object classes against the complete ground truth is far
lower than with the sentinel preserved.

Thread: https://github.com/opengeos/geoai/issues/765
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

NUM_CLASSES = 3
IGNORE = -100
SIZE = 24


def make_scene(rng):
    """One synthetic 3-band tile with square (class 1) and round (class 2) objects.

    Returns the image, the full ground truth, and the annotated label raster in which a
    random half-plane strip was never labelled (value -100, like a no-data region)."""
    img = rng.normal(0.0, 0.3, size=(3, SIZE, SIZE)).astype(np.float32)
    full = np.zeros((SIZE, SIZE), dtype=np.int64)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    for _ in range(rng.integers(2, 5)):
        cls = int(rng.integers(1, 3))
        cy, cx = rng.integers(3, SIZE - 3, size=2)
        r = int(rng.integers(2, 4))
        if cls == 1:
            m = (abs(yy - cy) <= r) & (abs(xx - cx) <= r)
            img[0][m] += 1.5
        else:
            m = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
            img[1][m] += 1.5
        img[2][m] -= 0.5
        full[m] = cls
    labels = full.copy()
    # a no-data strip: part of the tile was never annotated
    cut = int(rng.integers(6, 18))
    if rng.random() < 0.5:
        labels[:, cut:] = IGNORE
    else:
        labels[cut:, :] = IGNORE
    return img, full, labels


class SemanticSegmentationDataset(Dataset):
    def __init__(self, n, num_classes, seed):
        rng = np.random.default_rng(seed)
        self.num_classes = num_classes
        self.items = [make_scene(rng) for _ in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        image, full, label_mask = self.items[idx]
        mask = np.asarray(label_mask, dtype=np.int64)
        if self.num_classes > 2:
            # keep ids inside the valid class range
            # BUG: this also turns the -100 no-data sentinel into class 0 (background)
            mask = mask.clip(min=0, max=self.num_classes - 1)
        elif mask.max() > 1:
            mask = (mask > 0).astype(np.int64)
        label_mask = mask
        return torch.from_numpy(image), torch.from_numpy(label_mask), torch.from_numpy(full)


class SmallSegNet(nn.Module):
    def __init__(self, in_ch=3, num_classes=NUM_CLASSES, width=24):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(in_ch, width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=2, dilation=2), nn.ReLU(),
        )
        self.head = nn.Conv2d(width, num_classes, 1)

    def forward(self, x):
        return self.head(self.body(x))


def iou_coefficient(pred, target, num_classes, ignore_index=IGNORE):
    valid = target != ignore_index
    ious = []
    for c in range(1, num_classes):
        p = (pred == c) & valid
        t = (target == c) & valid
        union = (p | t).sum().item()
        if union:
            ious.append((p & t).sum().item() / union)
    return float(np.mean(ious)) if ious else 0.0


def f1_score(pred, target, num_classes, ignore_index=IGNORE):
    valid = target != ignore_index
    f1s = []
    for c in range(1, num_classes):
        p = (pred == c) & valid
        t = (target == c) & valid
        tp = (p & t).sum().item()
        denom = p.sum().item() + t.sum().item()
        if denom:
            f1s.append(2 * tp / denom)
    return float(np.mean(f1s)) if f1s else 0.0


def evaluate(model, loader, num_classes):
    model.eval()
    preds, labels, fulls = [], [], []
    with torch.no_grad():
        for img, lab, full in loader:
            preds.append(model(img).argmax(1))
            labels.append(lab)
            fulls.append(full)
    model.train()
    pred, lab, full = torch.cat(preds), torch.cat(labels), torch.cat(fulls)
    return (iou_coefficient(pred, lab, num_classes), f1_score(pred, lab, num_classes),
            iou_coefficient(pred, full, num_classes))


def train_segmentation_model(num_epochs=10, batch_size=16, learning_rate=3e-3,
                             num_classes=NUM_CLASSES):
    g = torch.Generator().manual_seed(0)
    train_ds = SemanticSegmentationDataset(256, num_classes, seed=1)
    val_ds = SemanticSegmentationDataset(96, num_classes, seed=2)
    train_loader = DataLoader(train_ds, batch_size=batch_size, shuffle=True, generator=g)
    val_loader = DataLoader(val_ds, batch_size=48, shuffle=False)

    model = SmallSegNet(num_classes=num_classes)
    criterion = nn.CrossEntropyLoss()  # ignore_index defaults to -100
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)

    step = 0
    for epoch in range(num_epochs):
        running = 0.0
        for img, lab, _ in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(img), lab)
            loss.backward()
            optimizer.step()
            running += loss.item()
            step += 1
        if epoch % 3 == 2 or epoch == num_epochs - 1:
            val_iou, val_f1, _ = evaluate(model, val_loader, num_classes)
            print(f"epoch {epoch + 1:2d}  step {step:4d}  train loss {running / len(train_loader):.4f}"
                  f"  val IoU {val_iou:.3f}  val F1 {val_f1:.3f}")
    _, _, full_iou = evaluate(model, val_loader, num_classes)
    print(f"object-class IoU against the complete ground truth: {full_iou:.3f}")
    return model


def main():
    torch.manual_seed(0)
    train_segmentation_model()


if __name__ == "__main__":
    main()
