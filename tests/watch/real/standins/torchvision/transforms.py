"""Stand-ins for torchvision.transforms as cheap tensor operations on (C, H, W) float tensors."""
from __future__ import annotations

import numbers

import numpy as np
import torch
import torch.nn.functional as F


class Compose:
    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class ToTensor:
    """A tensor passes; an (H, W[, C]) uint8 array or array-like becomes a (C, H, W) float in [0, 1]."""
    def __call__(self, x):
        if isinstance(x, torch.Tensor):
            return x
        a = np.asarray(x)
        if a.ndim == 2:
            a = a[:, :, None]
        t = torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1)))
        return t.float().div(255) if a.dtype == np.uint8 else t.float()


class PILToTensor(ToTensor):
    pass


class Normalize:
    def __init__(self, mean, std, inplace=False):
        self.mean, self.std = torch.as_tensor(mean).view(-1, 1, 1), torch.as_tensor(std).view(-1, 1, 1)

    def __call__(self, x):
        return (x - self.mean) / self.std


class Lambda:
    def __init__(self, fn):
        self.fn = fn

    def __call__(self, x):
        return self.fn(x)


def _size(size):
    return (size, size) if isinstance(size, numbers.Number) else tuple(size)


class Resize:
    """An int resizes the shorter side, as torchvision; a pair sets (H, W)."""
    def __init__(self, size, *args, **kwargs):
        self.size = size

    def __call__(self, x):
        h, w = x.shape[-2:]
        if isinstance(self.size, numbers.Number):
            s = int(self.size)
            out = (s, max(1, round(w * s / h))) if h <= w else (max(1, round(h * s / w)), s)
        else:
            out = tuple(self.size)
        if out == (h, w):
            return x
        return F.interpolate(x.unsqueeze(0), size=out, mode="bilinear", align_corners=False).squeeze(0)


Scale = Resize


class CenterCrop:
    def __init__(self, size):
        self.size = _size(size)

    def __call__(self, x):
        h, w = x.shape[-2:]
        th, tw = self.size
        if (h, w) != (th, tw) and (h < th or w < tw):
            x = Resize((max(h, th), max(w, tw)))(x)
            h, w = x.shape[-2:]
        top, left = (h - th) // 2, (w - tw) // 2
        return x[..., top:top + th, left:left + tw]


class RandomCrop:
    def __init__(self, size, padding=None, **kwargs):
        self.size, self.padding = _size(size), padding or 0

    def __call__(self, x):
        if self.padding:
            x = F.pad(x, (self.padding,) * 4)
        return CenterCrop(self.size)(x)


class RandomResizedCrop(Resize):
    def __init__(self, size, *args, **kwargs):
        super().__init__(_size(size))


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, x):
        return x


RandomVerticalFlip = RandomHorizontalFlip


class Grayscale:
    def __init__(self, num_output_channels=1):
        self.n = num_output_channels

    def __call__(self, x):
        return x.mean(0, keepdim=True).expand(self.n, *x.shape[1:]).clone()


class ColorJitter:
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, x):
        return x


class Pad:
    def __init__(self, padding, fill=0, padding_mode="constant"):
        self.padding, self.fill = padding, fill

    def __call__(self, x):
        p = self.padding
        pads = (p, p, p, p) if isinstance(p, int) else (p[0], p[0], p[1], p[1]) if len(p) == 2 else (p[0], p[2], p[1], p[3])
        return F.pad(x, pads, value=self.fill)
