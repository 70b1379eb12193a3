"""PointNet shape classification on synthetic point clouds, with the class log-probabilities
normalized over the wrong axis.

The code keeps the shape of a PointNet repository: an `STN3D` input transform, a
`PointNetfeat` trunk of 1x1 Conv1d + BatchNorm layers with a max-pool, a `PointNetCls`
head that returns `(log_probs, trans)`, and a `train(config)` function that builds
train/test DataLoaders over a ModelNet-like `ClsDataset`, trains with SGD + momentum and
`F.nll_loss`, prints the train loss/accuracy of every iteration, scores one test batch
(`next(enumerate(test_dataloader))`) every 10 iterations and prints mean train/test
accuracy per epoch. The bug: the classifier head ends with `F.log_softmax(x, dim=0)`.
The output is (batch, k), so dim 0 is the batch axis: each class column is normalized
across the samples of the batch instead of each sample across its classes. NLL then asks
every sample to out-score the other samples of its batch on its own class column, the
argmax used for accuracy compares numbers that were normalized per column, and the model
trains to a worse classifier without any error or warning.

Thread: https://github.com/yunxiaoshi/pointnet-pytorch/issues/2
"""
import math
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class STN3D(nn.Module):
    def __init__(self):
        super(STN3D, self).__init__()
        self.conv1 = nn.Conv1d(3, 32, 1)
        self.conv2 = nn.Conv1d(32, 64, 1)
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 9)
        self.bn1 = nn.BatchNorm1d(32)
        self.bn2 = nn.BatchNorm1d(64)
        self.bn3 = nn.BatchNorm1d(32)
        nn.init.zeros_(self.fc2.weight)
        nn.init.zeros_(self.fc2.bias)

    def forward(self, x):
        batchsize = x.size(0)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = torch.max(x, 2)[0]
        x = F.relu(self.bn3(self.fc1(x)))
        x = self.fc2(x)
        iden = torch.eye(3).flatten().view(1, 9).repeat(batchsize, 1)
        return (x + iden).view(-1, 3, 3)


class PointNetfeat(nn.Module):
    def __init__(self):
        super(PointNetfeat, self).__init__()
        self.stn = STN3D()
        self.conv1 = nn.Conv1d(3, 32, 1)
        self.conv2 = nn.Conv1d(32, 64, 1)
        self.conv3 = nn.Conv1d(64, 128, 1)
        self.bn1 = nn.BatchNorm1d(32)
        self.bn2 = nn.BatchNorm1d(64)
        self.bn3 = nn.BatchNorm1d(128)

    def forward(self, x):
        trans = self.stn(x)
        x = torch.bmm(x.transpose(2, 1), trans).transpose(2, 1)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        x = torch.max(x, 2)[0]
        return x, trans


class PointNetCls(nn.Module):
    def __init__(self, k=2):
        super(PointNetCls, self).__init__()
        self.k = k
        self.feat = PointNetfeat()
        self.fc1 = nn.Linear(128, 64)
        self.fc2 = nn.Linear(64, 32)
        self.fc3 = nn.Linear(32, k)
        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(32)

    def forward(self, x):
        x, trans = self.feat(x)
        x = F.relu(self.bn1(self.fc1(x)))
        x = F.relu(self.bn2(self.fc2(x)))
        x = self.fc3(x)
        return F.log_softmax(x, dim=0), trans


def sample_shape(label, npoints, g):
    """Points on the surface of one of five primitive shapes, randomly rotated and scaled."""
    u = torch.rand(npoints, generator=g)
    v = torch.rand(npoints, generator=g)
    if label == 0:  # sphere
        p = torch.randn(npoints, 3, generator=g)
        p = p / p.norm(dim=1, keepdim=True)
    elif label == 1:  # cube surface
        p = torch.rand(npoints, 3, generator=g) * 2 - 1
        ax = torch.randint(0, 3, (npoints,), generator=g)
        p[torch.arange(npoints), ax] = torch.sign(p[torch.arange(npoints), ax])
    elif label == 2:  # cylinder
        th = 2 * math.pi * u
        p = torch.stack([torch.cos(th), torch.sin(th), 2 * v - 1], 1)
    elif label == 3:  # cone
        th = 2 * math.pi * u
        r = 1 - v
        p = torch.stack([r * torch.cos(th), r * torch.sin(th), 2 * v - 1], 1)
    else:  # flat disc with a rim (plate)
        th = 2 * math.pi * u
        r = torch.sqrt(v)
        p = torch.stack([r * torch.cos(th), r * torch.sin(th), 0.1 * (2 * torch.rand(npoints, generator=g) - 1)], 1)
    a = 2 * math.pi * torch.rand(1, generator=g).item()
    rot = torch.tensor([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0], [0.0, 0.0, 1.0]])
    scale = 0.7 + 0.6 * torch.rand(3, generator=g)
    return (p * scale) @ rot.T + 0.02 * torch.randn(npoints, 3, generator=g)


class ClsDataset(torch.utils.data.Dataset):
    num_classes = 5

    def __init__(self, n_per_class, npoints, seed):
        g = torch.Generator().manual_seed(seed)
        pts, labels = [], []
        for c in range(self.num_classes):
            for _ in range(n_per_class):
                pts.append(sample_shape(c, npoints, g))
                labels.append(c)
        self.points = torch.stack(pts)
        self.labels = torch.tensor(labels).view(-1, 1)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.points[i], self.labels[i]


def train(config):
    print('Random seed: %d' % int(config.seed))
    torch.manual_seed(config.seed)
    dataset = ClsDataset(n_per_class=80, npoints=config.npoints, seed=1)
    test_dataset = ClsDataset(n_per_class=30, npoints=config.npoints, seed=2)
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=config.batchsize, shuffle=True, drop_last=True)
    test_dataloader = torch.utils.data.DataLoader(test_dataset, batch_size=config.batchsize, shuffle=True)
    num_classes = dataset.num_classes
    print('train set size: %d | test set size: %d' % (len(dataset), len(test_dataset)))

    classifier = PointNetCls(k=num_classes)
    optimizer = optim.SGD(classifier.parameters(), lr=config.lr, momentum=config.momentum)
    num_batch = len(dataset) // config.batchsize

    for epoch in range(config.nepochs):
        train_acc_epoch, test_acc_epoch = [], []
        for i, data in enumerate(dataloader):
            points, labels = data
            points = points.transpose(2, 1)
            labels = labels[:, 0]
            optimizer.zero_grad()
            classifier = classifier.train()
            pred, _ = classifier(points)
            pred = pred.view(-1, num_classes)
            loss = F.nll_loss(pred, labels)
            loss.backward()
            optimizer.step()
            pred_choice = pred.data.max(1)[1]
            correct = pred_choice.eq(labels.data).sum()
            train_acc = correct.item() / float(config.batchsize)
            train_acc_epoch.append(train_acc)

            if (i + 1) % 10 == 0:
                j, data = next(enumerate(test_dataloader, 0))
                points, labels = data
                points = points.transpose(2, 1)
                labels = labels[:, 0]
                classifier = classifier.eval()
                with torch.no_grad():
                    pred, _ = classifier(points)
                pred = pred.view(-1, num_classes)
                pred_choice = pred.data.max(1)[1]
                test_acc = pred_choice.eq(labels.data).sum().item() / float(len(labels))
                test_acc_epoch.append(test_acc)
        print('epoch %d: %d iters | last train loss: %f | mean train acc: %f | mean test acc: %f' % (
            epoch + 1, num_batch, loss.item(), np.mean(train_acc_epoch), np.mean(test_acc_epoch)))

    classifier.eval()
    correct = 0
    for points, labels in torch.utils.data.DataLoader(test_dataset, batch_size=config.batchsize):
        with torch.no_grad():
            pred, _ = classifier(points.transpose(2, 1))
        correct += pred.max(1)[1].eq(labels[:, 0]).sum().item()
    print('final accuracy over the whole test set: %f' % (correct / len(test_dataset)))


def main():
    torch.set_num_threads(1)
    config = SimpleNamespace(seed=0, npoints=256, batchsize=32, lr=0.01, momentum=0.9, nepochs=10)
    train(config)


if __name__ == "__main__":
    main()
