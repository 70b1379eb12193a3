"""A MONAI-tutorial-style 3D image classifier (densenet_training_array shape): a list of image paths
built by globbing one class folder after the other (all "AD" scans, then all "FTD" scans), a label
array built the same way, an ImageDataset that loads each path and applies ScaleIntensity /
AddChannel / Resize / RandRotate90 transforms, a small DenseNet-like 3D CNN, and a training loop
with epoch_loss, a val_interval, and a validation pass that counts num_correct / metric_count and
keeps best_metric. The split is train = images[:10], val = images[-10:] without shuffling the list
first, so training only ever sees the first class and validation only the second: the training
loss drops towards zero (the network learns to always answer class 0) while the validation
accuracy is 0.0 in every epoch.

Thread: https://github.com/Project-MONAI/tutorials/issues/122
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOL = 20


def fake_glob(folder, n):
    return [f"/data/{folder}/sub-{i:03d}_T1w.nii.gz" for i in range(n)]


def load_volume(path):
    """Stand-in for a NIfTI reader: a seeded synthetic scan whose pattern depends on the folder."""
    seed = sum(ord(c) * (i + 1) for i, c in enumerate(path)) % (2 ** 31)
    rng = np.random.default_rng(seed)
    zz, yy, xx = np.meshgrid(*[np.linspace(-1, 1, VOL)] * 3, indexing="ij")
    r = np.sqrt(xx ** 2 + yy ** 2 + zz ** 2)
    brain = (r < 0.8).astype(np.float32) * 800.0
    if "/AD/" in path:        # enlarged ventricles
        brain[r < 0.35 + 0.05 * rng.random()] = 150.0
    else:                      # frontal atrophy
        brain[(zz > 0.3) & (r < 0.8)] *= 0.4 + 0.1 * rng.random()
    return brain + rng.normal(0, 60.0, brain.shape).astype(np.float32)


class ScaleIntensity:
    def __call__(self, img):
        return (img - img.min()) / (img.max() - img.min() + 1e-8)


class AddChannel:
    def __call__(self, img):
        return img[None]


class Resize:
    def __init__(self, spatial_size):
        self.spatial_size = spatial_size

    def __call__(self, img):
        t = torch.as_tensor(img)[None]
        return F.interpolate(t, size=self.spatial_size, mode="trilinear", align_corners=False)[0].numpy()


class RandRotate90:
    def __init__(self, prob=0.5):
        self.prob = prob

    def __call__(self, img):
        if torch.rand(1).item() < self.prob:
            k = int(torch.randint(1, 4, (1,)))
            img = np.rot90(img, k, axes=(2, 3)).copy()
        return img


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class ImageDataset(Dataset):
    def __init__(self, image_files, labels, transform):
        self.image_files, self.labels, self.transform = image_files, labels, transform

    def __len__(self):
        return len(self.image_files)

    def __getitem__(self, i):
        img = self.transform(load_volume(self.image_files[i]))
        return torch.as_tensor(img, dtype=torch.float32), torch.as_tensor(self.labels[i])


class DenseLayer(nn.Module):
    def __init__(self, c_in, growth):
        super().__init__()
        self.layers = nn.Sequential(nn.BatchNorm3d(c_in), nn.ReLU(), nn.Conv3d(c_in, growth, 3, padding=1))

    def forward(self, x):
        return torch.cat([x, self.layers(x)], dim=1)


class DenseNet3D(nn.Module):
    def __init__(self, in_channels, out_channels, growth=8):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv3d(in_channels, 16, 3, stride=2, padding=1),
            DenseLayer(16, growth), DenseLayer(16 + growth, growth),
            nn.BatchNorm3d(16 + 2 * growth), nn.ReLU(), nn.AvgPool3d(2),
            DenseLayer(16 + 2 * growth, growth),
            nn.BatchNorm3d(16 + 3 * growth), nn.ReLU(),
        )
        self.class_layers = nn.Linear(16 + 3 * growth, out_channels)

    def forward(self, x):
        return self.class_layers(F.adaptive_avg_pool3d(self.features(x), 1).flatten(1))


def main():
    torch.manual_seed(3)
    images = fake_glob("AD", 12) + fake_glob("FTD", 12)
    labels = np.array([0] * 12 + [1] * 12, dtype=np.int64)

    train_transforms = Compose([ScaleIntensity(), AddChannel(), Resize((16, 16, 16)), RandRotate90()])
    val_transforms = Compose([ScaleIntensity(), AddChannel(), Resize((16, 16, 16))])

    train_ds = ImageDataset(image_files=images[:10], labels=labels[:10], transform=train_transforms)
    train_loader = DataLoader(train_ds, batch_size=2, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_ds = ImageDataset(image_files=images[-10:], labels=labels[-10:], transform=val_transforms)
    val_loader = DataLoader(val_ds, batch_size=2)

    model = DenseNet3D(in_channels=1, out_channels=2)
    loss_function = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), 1e-3)

    val_interval = 2
    best_metric, best_metric_epoch = -1, -1
    for epoch in range(24):
        model.train()
        epoch_loss, step = 0.0, 0
        for inputs, targets in train_loader:
            step += 1
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = loss_function(outputs, targets)
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()
        epoch_loss /= step
        if (epoch + 1) % val_interval == 0:
            model.eval()
            with torch.no_grad():
                num_correct, metric_count = 0.0, 0
                for val_images, val_labels in val_loader:
                    val_outputs = model(val_images)
                    value = torch.eq(val_outputs.argmax(dim=1), val_labels)
                    metric_count += len(value)
                    num_correct += value.sum().item()
                metric = num_correct / metric_count
                if metric > best_metric:
                    best_metric, best_metric_epoch = metric, epoch + 1
            print(f"epoch {epoch + 1} average loss: {epoch_loss:.4f}  current accuracy: {metric:.4f}"
                  f"  best accuracy: {best_metric:.4f} at epoch {best_metric_epoch}")
    print(f"train completed, best_metric: {best_metric:.4f} at epoch: {best_metric_epoch}")


if __name__ == "__main__":
    main()
