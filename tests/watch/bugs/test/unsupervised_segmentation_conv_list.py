"""An unsupervised image segmentation demo: a small fully convolutional net (conv1/bn1, nConv-1
middle conv+BN blocks, a 1x1 conv3/bn3 with nChannel outputs) is fitted to one image; at every
iteration the argmax over channels gives a label per pixel, the labels are made uniform inside
each superpixel, and those refined labels are the CrossEntropyLoss target (SGD, momentum 0.9).
MyNet.__init__ keeps the middle conv and BatchNorm layers in plain Python lists (self.conv2,
self.bn2), so they are not registered: model.parameters() leaves them out and SGD never updates
them, while forward() still runs the image through their random initial weights.

Thread: https://github.com/kanezaki/pytorch-unsupervised-segmentation/pull/6
"""
import argparse

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim

args = argparse.Namespace(nChannel=100, maxIter=100, minLabels=3, lr=0.1, nConv=2, superpixel_size=4)


class MyNet(nn.Module):
    def __init__(self, input_dim):
        super().__init__()
        self.conv1 = nn.Conv2d(input_dim, args.nChannel, kernel_size=3, stride=1, padding=1)
        self.bn1 = nn.BatchNorm2d(args.nChannel)
        self.conv2 = []
        self.bn2 = []
        for _ in range(args.nConv - 1):
            self.conv2.append(nn.Conv2d(args.nChannel, args.nChannel, kernel_size=3, stride=1, padding=1))
            self.bn2.append(nn.BatchNorm2d(args.nChannel))
        self.conv3 = nn.Conv2d(args.nChannel, args.nChannel, kernel_size=1, stride=1, padding=0)
        self.bn3 = nn.BatchNorm2d(args.nChannel)

    def forward(self, x):
        x = self.bn1(F.relu(self.conv1(x)))
        for i in range(args.nConv - 1):
            x = self.bn2[i](F.relu(self.conv2[i](x)))
        return self.bn3(self.conv3(x))


def synthetic_image(h=32, w=32, seed=0):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    im = np.zeros((h, w, 3), dtype=np.float32)
    im[:] = (0.2, 0.5, 0.8)                                          # sky
    im[yy > 0.6 * h + 3 * np.sin(xx / 4.0)] = (0.3, 0.6, 0.2)        # grass
    im[(yy - 12) ** 2 + (xx - 20) ** 2 < 30] = (0.9, 0.8, 0.2)       # sun
    im[(yy > 14) & (yy < 24) & (xx > 3) & (xx < 11)] = (0.6, 0.3, 0.2)  # house
    return np.clip(im + 0.05 * rng.standard_normal(im.shape).astype(np.float32), 0, 1)


def grid_superpixels(h, w, size):
    """Stands in for SLIC: square cells of size x size pixels."""
    cell = (np.arange(h)[:, None] // size) * ((w + size - 1) // size) + (np.arange(w)[None, :] // size)
    labels = cell.reshape(h * w)
    return [np.where(labels == u)[0] for u in np.unique(labels)]


def main():
    torch.manual_seed(0)
    im = synthetic_image()
    data = torch.from_numpy(np.array([im.transpose((2, 0, 1))]))
    l_inds = grid_superpixels(im.shape[0], im.shape[1], args.superpixel_size)

    model = MyNet(data.size(1))
    model.train()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    print("parameter tensors in the optimizer:", len(optimizer.param_groups[0]["params"]))
    for batch_idx in range(args.maxIter):
        optimizer.zero_grad()
        output = model(data)[0]
        output = output.permute(1, 2, 0).contiguous().view(-1, args.nChannel)
        _, target = torch.max(output, 1)
        im_target = target.data.cpu().numpy()
        nLabels = len(np.unique(im_target))

        # superpixel refinement
        for inds in l_inds:
            labels_per_sp = im_target[inds]
            u_labels_per_sp, counts = np.unique(labels_per_sp, return_counts=True)
            im_target[inds] = u_labels_per_sp[np.argmax(counts)]
        target = torch.from_numpy(im_target)
        loss = loss_fn(output, target)
        loss.backward()
        optimizer.step()

        if batch_idx % 10 == 0:
            print(batch_idx, "/", args.maxIter, ":", nLabels, round(loss.item(), 4))
        if nLabels <= args.minLabels:
            print("nLabels", nLabels, "reached minLabels", args.minLabels, ".")
            break


if __name__ == "__main__":
    main()
