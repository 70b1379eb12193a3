"""Synthetic stand-ins for torchvision.datasets: seeded, class-dependent images of the real shape.

Each image is a per-class prototype plus noise, so a model can learn something from it and
the labels are not pure noise. Items are float tensors in [0, 1] shaped (C, H, W), as
`transforms.ToTensor()` would give, before the dataset's own transform. Lengths are small
(KB_STANDIN_TRAIN_LEN / KB_STANDIN_TEST_LEN, default 2048 / 512) so an epoch takes seconds.
"""
from __future__ import annotations

import os

import torch
from torch.utils.data import Dataset


def _len(train: bool) -> int:
    key, default = ("KB_STANDIN_TRAIN_LEN", 2048) if train else ("KB_STANDIN_TEST_LEN", 512)
    return int(os.environ.get(key, default))


def _images(n: int, shape: tuple, classes: int, seed: int):
    """n uint8 images shaped (n, *shape) and their int64 labels, from a fixed seed."""
    g = torch.Generator().manual_seed(seed)
    protos = torch.rand((classes, *shape), generator=g)
    labels = torch.randint(0, classes, (n,), generator=g)
    noise = torch.rand((n, *shape), generator=g)
    images = (0.6 * protos[labels] + 0.4 * noise).mul(255).round().to(torch.uint8)
    return images, labels


class _Synthetic(Dataset):
    shape = (1, 28, 28)   # C, H, W of one item
    classes = 10
    seed = 0

    def __init__(self, root=None, train=True, download=False, transform=None, target_transform=None,
                 length=None, **kwargs):
        self.root, self.train = root, train
        self.transform, self.target_transform = transform, target_transform
        n = _len(train) if length is None else length
        self._images, self._labels = _images(n, self.shape, self.classes, self.seed + (0 if train else 1))
        self.classes_names = [str(i) for i in range(self.classes)]

    def __len__(self):
        return self._labels.shape[0]

    def _item(self, index):
        return self._images[index].float().div(255)

    def __getitem__(self, index):
        img, target = self._item(index), int(self._labels[index])
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target


class MNIST(_Synthetic):
    """28x28 gray images, 10 classes; `.data` (N, 28, 28) uint8 and `.targets` as torchvision,
    and the old names `train_data`, `train_labels`, `test_data`, `test_labels`."""
    shape = (1, 28, 28)
    seed = 10

    @property
    def data(self):
        return self._images[:, 0]

    @property
    def targets(self):
        return self._labels

    train_data = test_data = data
    train_labels = test_labels = targets


class FashionMNIST(MNIST):
    seed = 20


class KMNIST(MNIST):
    seed = 30


class CIFAR10(_Synthetic):
    """32x32 RGB images, 10 classes; `.data` (N, 32, 32, 3) uint8 array and `.targets` list."""
    shape = (3, 32, 32)
    seed = 40

    @property
    def data(self):
        return self._images.permute(0, 2, 3, 1).numpy()

    @property
    def targets(self):
        return self._labels.tolist()


class CIFAR100(CIFAR10):
    classes = 100
    seed = 50


class FakeData(_Synthetic):
    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None,
                 target_transform=None, random_offset=0, **kwargs):
        self.shape, self.classes = tuple(image_size), num_classes
        super().__init__(train=True, transform=transform, target_transform=target_transform,
                         length=min(size, _len(True)))


class ImageFolder(_Synthetic):
    """Folders of images: 3x64x64 RGB, 10 classes (the folder is not read)."""
    shape = (3, 64, 64)
    seed = 60

    def __init__(self, root=None, transform=None, target_transform=None, **kwargs):
        super().__init__(root, True, False, transform, target_transform)


class LSUN(ImageFolder):
    seed = 70


__all__ = ["MNIST", "FashionMNIST", "KMNIST", "CIFAR10", "CIFAR100", "FakeData", "ImageFolder", "LSUN"]
