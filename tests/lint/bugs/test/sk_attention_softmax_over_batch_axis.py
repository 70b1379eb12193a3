"""
Shape: standalone attention-block module (SKNet-style selective kernel) with a ModuleList of conv branches, a squeeze fc, per-branch fcs, and self.branch_norm = nn.Softmax(dim=...) built in __init__; forward stacks branch weights on a new leading axis; a __main__ demo runs a random batch through it.
Bug: the branch weights are stacked to shape (k, bs, channel, 1, 1) but self.branch_norm normalises over dim=1, the batch axis, instead of dim=0 across the k branches.
Thread: https://github.com/xmu-xiaoma666/External-Attention-pytorch/issues/18
"""
import collections

import torch
from torch import nn


class SelectiveKernelBlock(nn.Module):
    def __init__(self, ch=512, ksizes=[1, 3, 5, 7], ratio=16, groups=1, min_hidden=32):
        super().__init__()
        self.hidden = max(min_hidden, ch // ratio)
        self.branches = nn.ModuleList([])
        for k in ksizes:
            self.branches.append(nn.Sequential(collections.OrderedDict([
                ("conv", nn.Conv2d(ch, ch, k, padding=k // 2, groups=groups)),
                ("norm", nn.BatchNorm2d(ch)),
                ("act", nn.ReLU()),
            ])))
        self.squeeze_fc = nn.Linear(ch, self.hidden)
        self.expand_fcs = nn.ModuleList([])
        for _ in range(len(ksizes)):
            self.expand_fcs.append(nn.Linear(self.hidden, ch))
        self.branch_norm = nn.Softmax(dim=1)

    def forward(self, x):
        bs, c, _, _ = x.size()
        branch_outs = [conv(x) for conv in self.branches]
        stacked = torch.stack(branch_outs, 0)

        fused = sum(branch_outs)
        squeezed = fused.mean(-1).mean(-1)
        z = self.squeeze_fc(squeezed)

        logits_per_branch = []
        for fc in self.expand_fcs:
            logits_per_branch.append(fc(z).view(bs, c, 1, 1))
        mix = torch.stack(logits_per_branch, 0)
        mix = self.branch_norm(mix)

        return (mix * stacked).sum(0)


if __name__ == "__main__":
    batch = torch.randn(50, 512, 7, 7)
    block = SelectiveKernelBlock(ch=512, ratio=8)
    out = block(batch)
    print(out.shape)
