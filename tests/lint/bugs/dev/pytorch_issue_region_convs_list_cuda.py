"""
Shape: a region-layer network keeps two small conv branches (each an nn.Sequential of two 3x3
convs) in an attribute list `self.convs`, indexes them in `forward`, and the script builds the net
and moves it with `net.cuda()` before use.
Bug: `self.convs` is a plain Python list, so the Sequential branches are not registered submodules:
`.cuda()` leaves their weights on the CPU and `.parameters()`/state_dict do not see them. The
reporter fixed it by registering each branch with `add_module`.
Thread: https://github.com/pytorch/pytorch/issues/4412
"""
import torch
import torch.nn as nn


def branch(channels):
    return nn.Sequential(
        nn.Conv2d(channels, channels, kernel_size=3, stride=1, padding=1),
        nn.Conv2d(channels, channels, kernel_size=3, stride=1, padding=1),
    )


class RegionNet(nn.Module):
    def __init__(self, in_channels=32):
        super().__init__()
        self.in_channels = in_channels
        self.convs = [branch(self.in_channels), branch(self.in_channels)]

    def forward(self, x):
        out = self.convs[0](x)
        out = self.convs[1](x)
        return out


def main():
    net = RegionNet()
    net.cuda()
    x = torch.randn(2, 32, 16, 16).cuda()
    y = net(x)
    return y.shape
