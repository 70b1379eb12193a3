"""A YOLO-style classification trainer: check_cls_dataset() reads the class names from the
train/ subfolders, build_dataset() makes one ClassificationDataset per split (each wraps an
ImageFolder-like scan of its own root), a ClassificationTrainer runs the epoch loop (AdamW,
linear LambdaLR, cross entropy) and calls a ClassificationValidator after every epoch whose
top-1 accuracy is the fitness that picks best.pt.

The task is image rotation (folders 0, 90, 180, 270) and val/ has no 180 folder. The val
dataset numbers its own sorted folders, so 270 and 90 get indices one lower than the model's
class order: the model learns the task, but validation top-1 is stuck near one third and the
best checkpoint is chosen on that wrong number.

Thread: https://github.com/ultralytics/ultralytics/pull/26192
"""
import os
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

ROTATIONS = ["0", "90", "180", "270"]
IMG = 16


def write_split(root, counts, seed):
    """Write a split as folder-per-class .npy images (grey 16x16, an arrow-like pattern rotated)."""
    rng = np.random.default_rng(seed)
    base = np.zeros((IMG, IMG), np.float32)
    base[2:6, 2:12] = 1.0          # bar along the top
    base[6:12, 2:5] = 0.8          # leg down the left side
    for name, n in zip(ROTATIONS, counts):
        if n == 0:
            continue               # no images of this rotation in this split, so no folder
        os.makedirs(os.path.join(root, name), exist_ok=True)
        k = int(name) // 90
        for i in range(n):
            img = np.rot90(base, k=k).copy() + 0.9 * rng.standard_normal((IMG, IMG)).astype(np.float32)
            np.save(os.path.join(root, name, f"{name}_{i:04d}.npy"), img.astype(np.float32))


def find_classes(directory):
    classes = sorted(e.name for e in os.scandir(directory) if e.is_dir())
    return classes, {c: i for i, c in enumerate(classes)}


class ImageFolderScan:
    """Stand-in for torchvision ImageFolder: labels come from this root's own sorted folders."""

    def __init__(self, root):
        self.classes, self.class_to_idx = find_classes(root)
        self.samples = []
        for c in self.classes:
            for f in sorted(os.listdir(os.path.join(root, c))):
                self.samples.append((os.path.join(root, c, f), self.class_to_idx[c]))


def check_cls_dataset(data_dir):
    train = os.path.join(data_dir, "train")
    val = os.path.join(data_dir, "val")
    names, _ = find_classes(train)
    return {"train": train, "val": val, "nc": len(names), "names": dict(enumerate(names))}


class ClassificationDataset(Dataset):
    def __init__(self, root, augment=False, prefix=""):
        base = ImageFolderScan(root)
        self.samples = base.samples
        self.augment = augment
        print(f"{prefix}: {os.path.basename(root)}/ found {len(self.samples)} images in {len(base.classes)} classes")

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, j = self.samples[i]
        im = torch.from_numpy(np.load(path)).unsqueeze(0)
        if self.augment:
            im = im + 0.05 * torch.randn_like(im)
        return {"img": im, "cls": j}


class ClassificationModel(nn.Module):
    def __init__(self, nc):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.SiLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.SiLU(), nn.AdaptiveAvgPool2d(2),
        )
        self.head = nn.Linear(32 * 4, nc)

    def forward(self, x):
        return self.head(self.backbone(x).flatten(1))


class ClassificationLoss:
    def __call__(self, preds, batch):
        loss = F.cross_entropy(preds, batch["cls"], reduction="mean")
        return loss, loss.detach()


class ClassificationValidator:
    def __init__(self, dataloader, names):
        self.dataloader = dataloader
        self.names = names

    @torch.no_grad()
    def __call__(self, model):
        model.eval()
        pred, targets = [], []
        for batch in self.dataloader:
            logits = model(batch["img"])
            pred.append(logits.argsort(1, descending=True)[:, :5])
            targets.append(batch["cls"])
        pred, targets = torch.cat(pred), torch.cat(targets)
        correct = (targets[:, None] == pred).float()
        top1, top5 = correct[:, 0].mean().item(), correct.max(1).values.mean().item()
        model.train()
        return {"metrics/accuracy_top1": top1, "metrics/accuracy_top5": top5}, top1


class ClassificationTrainer:
    def __init__(self, data_dir, epochs=6, batch=32, lr0=2e-3, lrf=0.05):
        self.data = check_cls_dataset(data_dir)
        self.epochs, self.batch, self.lr0, self.lrf = epochs, batch, lr0, lrf
        self.best_fitness, self.best_epoch = None, -1

    def build_dataset(self, img_path, mode="train"):
        return ClassificationDataset(root=img_path, augment=mode == "train", prefix=mode)

    def _setup_train(self):
        torch.manual_seed(0)
        self.model = ClassificationModel(self.data["nc"])
        g = torch.Generator().manual_seed(0)
        self.train_loader = DataLoader(self.build_dataset(self.data["train"], "train"),
                                       batch_size=self.batch, shuffle=True, generator=g)
        self.test_loader = DataLoader(self.build_dataset(self.data["val"], "val"), batch_size=64)
        self.validator = ClassificationValidator(self.test_loader, self.data["names"])
        self.criterion = ClassificationLoss()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.lr0, weight_decay=5e-4)
        lf = lambda x: (1 - x / self.epochs) * (1.0 - self.lrf) + self.lrf  # noqa: E731
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda=lf)

    def validate(self):
        metrics, fitness = self.validator(self.model)
        if self.best_fitness is None or fitness > self.best_fitness:
            self.best_fitness, self.best_epoch = fitness, self.epoch
        return metrics, fitness

    def train(self):
        self._setup_train()
        for self.epoch in range(self.epochs):
            self.model.train()
            tloss, n = 0.0, 0
            for batch in self.train_loader:
                preds = self.model(batch["img"])
                loss, loss_item = self.criterion(preds, batch)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                tloss, n = tloss + loss_item.item(), n + 1
            self.scheduler.step()
            self.metrics, self.fitness = self.validate()
            print(f"epoch {self.epoch + 1}/{self.epochs}  loss {tloss / n:.4f}  "
                  f"top1 {self.metrics['metrics/accuracy_top1']:.3f}  "
                  f"top5 {self.metrics['metrics/accuracy_top5']:.3f}")
        return self.metrics


def main():
    with tempfile.TemporaryDirectory() as d:
        write_split(os.path.join(d, "train"), [80, 80, 80, 80], seed=1)
        write_split(os.path.join(d, "val"), [30, 30, 0, 30], seed=2)   # test/val set has no 180 images
        trainer = ClassificationTrainer(d)
        trainer.train()
        print(f"model names: {trainer.data['names']}")
        print(f"best fitness {trainer.best_fitness:.3f} at epoch {trainer.best_epoch + 1}")


if __name__ == "__main__":
    main()
