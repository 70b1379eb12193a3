"""A segmentation training script in the style of a MONAI spleen example: a Compose of dictionary
transforms whose random ones (flip, rotate 90, intensity shift) each own a numpy RandomState seeded
once through set_random_state, a Dataset applying them per item, a DataLoader with shuffle=True and
num_workers > 0, a small conv net trained with a soft Dice loss and Adam, and a validation pass in
eval mode every other epoch. The transforms' RandomStates are copied into every worker process in
the same state and nothing reseeds them per worker, so the workers draw identical augmentation
parameters (the same flip, rotation and shift for the n-th item of every worker) and, because the
workers start again from the same copy each epoch, the same sequence every epoch.

Thread: https://github.com/Project-MONAI/MONAI/issues/398
"""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Randomizable:
    def __init__(self):
        self.R = np.random.RandomState()

    def set_random_state(self, seed):
        self.R = np.random.RandomState(seed)


class RandFlipd(Randomizable):
    def __call__(self, d):
        if self.R.rand() < 0.5:
            d = {k: np.flip(v, axis=-1).copy() for k, v in d.items()}
        return d


class RandRotate90d(Randomizable):
    def __call__(self, d):
        k = self.R.randint(0, 4)
        return {key: np.rot90(v, k, axes=(-2, -1)).copy() for key, v in d.items()}


class RandShiftIntensityd(Randomizable):
    def __call__(self, d):
        d = dict(d)
        d["image"] = d["image"] + self.R.uniform(-0.3, 0.3)
        return d


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def set_random_state(self, seed):
        for i, t in enumerate(self.transforms):
            if isinstance(t, Randomizable):
                t.set_random_state(seed + i)
        return self

    def __call__(self, d):
        for t in self.transforms:
            d = t(d)
        return d


def make_cases(n, size=24, seed=0):
    rng = np.random.RandomState(seed)
    yy, xx = np.mgrid[:size, :size]
    cases = []
    for _ in range(n):
        cy, cx = rng.randint(5, size - 5, 2)
        r = rng.uniform(2.5, 5.0)
        label = (((yy - cy) ** 2 + (xx - cx * 0.7) ** 2) < r * r).astype(np.float32)
        image = label * 1.0 + rng.normal(0, 0.6, (size, size)).astype(np.float32)
        cases.append({"image": image[None].astype(np.float32), "label": label[None]})
    return cases


class CaseDataset(Dataset):
    def __init__(self, data, transform=None):
        self.data, self.transform = data, transform

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        d = self.data[i]
        return self.transform(d) if self.transform else d


class DiceLoss(nn.Module):
    def forward(self, logits, label):
        prob = torch.softmax(logits, 1)[:, 1:]
        inter = (prob * label).sum((1, 2, 3))
        return (1 - (2 * inter + 1e-5) / (prob.sum((1, 2, 3)) + label.sum((1, 2, 3)) + 1e-5)).mean()


def main():
    torch.manual_seed(0)
    train_files, val_files = make_cases(32, seed=1), make_cases(8, seed=2)
    train_transforms = Compose([RandFlipd(), RandRotate90d(), RandShiftIntensityd()]).set_random_state(0)
    train_ds = CaseDataset(train_files, train_transforms)
    train_loader = DataLoader(train_ds, batch_size=2, shuffle=True, num_workers=2)
    val_loader = DataLoader(CaseDataset(val_files), batch_size=4)
    model = nn.Sequential(nn.Conv2d(1, 12, 3, padding=1), nn.BatchNorm2d(12), nn.ReLU(),
                          nn.Conv2d(12, 12, 3, padding=1), nn.BatchNorm2d(12), nn.ReLU(),
                          nn.Conv2d(12, 2, 1))
    loss_function = DiceLoss()
    optimizer = torch.optim.Adam(model.parameters(), 1e-3)
    step = 0
    for epoch in range(5):
        model.train()
        epoch_loss = 0.0
        for batch_data in train_loader:
            step += 1
            inputs, labels = batch_data["image"], batch_data["label"]
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = loss_function(outputs, labels)
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()
        print(f"epoch {epoch + 1} average loss: {epoch_loss / len(train_loader):.4f}")
        if (epoch + 1) % 2 == 0:
            model.eval()
            with torch.no_grad():
                dice = [1 - loss_function(model(v["image"]), v["label"]).item() for v in val_loader]
            print(f"  val mean dice {np.mean(dice):.4f}")


if __name__ == "__main__":
    main()
