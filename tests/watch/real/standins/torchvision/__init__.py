"""A stand-in for torchvision, for running real training scripts on synthetic data.

Only what the scripts of tests/watch/real use: datasets that return seeded synthetic
images of the real shapes (no file or network is touched), transforms as cheap tensor
operations, `utils.save_image` as a no-op and a small `models.resnet18`. Not torchvision:
nothing here downloads, decodes or augments real images.
"""
from torchvision import datasets, models, transforms, utils  # noqa: F401

__version__ = "0.0-standin"
