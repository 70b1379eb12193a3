"""Stand-ins for torchvision.utils: nothing is written."""
import torch


def make_grid(tensor, *args, **kwargs):
    return tensor if isinstance(tensor, torch.Tensor) else torch.stack(list(tensor))


def save_image(tensor, fp=None, *args, **kwargs):
    return None
