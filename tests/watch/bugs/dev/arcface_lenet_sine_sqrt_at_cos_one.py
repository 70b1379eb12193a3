"""A face-recognition style training script on digit-like images: a LeNet-5 backbone maps each image
to a small embedding (two dimensions, so the class clusters can be plotted), an ArcMarginProduct
head turns embedding and label into margin logits s * cos(theta + m) for the target class, and a
plain loop calls model, metric_fc and CrossEntropyLoss, then zero_grad / backward / step, printing
loss and accuracy every print_freq iterations.

The head computes sine = torch.sqrt(1.0 - torch.pow(cosine, 2)). As soon as one embedding in a
batch points along a class weight (or exactly against one) to within float32 rounding, which with
a two-dimensional embedding happens within a few dozen steps, cosine is +-1, the argument of the
square root is exactly 0, and its derivative 1 / (2 sqrt(0)) is infinite. The forward pass and the printed loss stay finite, but the backward pass turns the
gradient of the head and of the whole backbone into NaN, and after that optimizer step every
weight is NaN and the loss is NaN for the rest of the run.

Thread: https://github.com/ronghuaiyang/arcface-pytorch/issues/32
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn import Parameter
from torch.utils.data import DataLoader, Dataset


class DigitLikeDataset(Dataset):
    """32x32 grey images: one fixed stroke pattern per class, shifted by a pixel or two, plus noise."""

    def __init__(self, n, num_classes=10, seed=0):
        g = torch.Generator().manual_seed(1234)
        base = torch.rand(num_classes, 1, 8, 8, generator=g)
        templates = F.interpolate(base, size=(28, 28), mode="bilinear", align_corners=False)
        templates = (templates > 0.55).float()
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, num_classes, (n,), generator=g)
        images = torch.zeros(n, 1, 32, 32)
        shifts = torch.randint(0, 5, (n, 2), generator=g)
        for i in range(n):
            dy, dx = shifts[i].tolist()
            images[i, :, dy:dy + 28, dx:dx + 28] = templates[self.labels[i]]
        self.images = images + 0.2 * torch.randn(n, 1, 32, 32, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


class LeNet5(nn.Module):
    def __init__(self, feat_dim=2):
        super().__init__()
        self.convnet = nn.Sequential(
            nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Conv2d(16, 120, 5), nn.ReLU())
        self.fc = nn.Sequential(nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, feat_dim))

    def forward(self, img):
        return self.fc(self.convnet(img).view(img.size(0), -1))


class ArcMarginProduct(nn.Module):
    """Large margin arc distance: cos(theta + m) for the target class, scaled by s."""

    def __init__(self, in_features, out_features, s=30.0, m=0.50, easy_margin=False):
        super().__init__()
        self.s, self.m = s, m
        self.weight = Parameter(torch.FloatTensor(out_features, in_features))
        nn.init.xavier_uniform_(self.weight)
        self.easy_margin = easy_margin
        self.cos_m, self.sin_m = math.cos(m), math.sin(m)
        self.th = math.cos(math.pi - m)
        self.mm = math.sin(math.pi - m) * m

    def forward(self, input, label):
        cosine = F.linear(F.normalize(input), F.normalize(self.weight))
        sine = torch.sqrt(1.0 - torch.pow(cosine, 2))
        phi = cosine * self.cos_m - sine * self.sin_m
        if self.easy_margin:
            phi = torch.where(cosine > 0, phi, cosine)
        else:
            phi = torch.where(cosine > self.th, phi, cosine - self.mm)
        one_hot = torch.zeros(cosine.size())
        one_hot.scatter_(1, label.view(-1, 1).long(), 1)
        output = (one_hot * phi) + ((1.0 - one_hot) * cosine)
        output *= self.s
        return output


def main():
    torch.manual_seed(0)
    train_dataset = DigitLikeDataset(3072, seed=0)
    trainloader = DataLoader(train_dataset, batch_size=64, shuffle=True,
                             generator=torch.Generator().manual_seed(0))
    model = LeNet5(feat_dim=2)
    metric_fc = ArcMarginProduct(2, 10, s=30, m=0.5)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam([{"params": model.parameters()}, {"params": metric_fc.parameters()}],
                                lr=1e-3, weight_decay=5e-4)
    print_freq = 10
    max_epoch = 4
    for i in range(max_epoch):
        model.train()
        for ii, (data_input, label) in enumerate(trainloader):
            feature = model(data_input)
            output = metric_fc(feature, label)
            loss = criterion(output, label)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            iters = i * len(trainloader) + ii
            if iters % print_freq == 0:
                pred = np.argmax(output.detach().numpy(), axis=1)
                acc = np.mean((pred == label.numpy()).astype(int))
                print(f"train epoch {i} iter {ii} loss {loss.item():.4f} acc {acc:.3f}")


if __name__ == "__main__":
    main()
