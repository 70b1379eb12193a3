"""
Shape: model module with STN3d / PointNetfeat / PointNetCls (forward returns log-probs and the 3x3 transform); flat train_classification script: PartDataset loaders, SGD with momentum, classifier.cuda(), per-batch zero_grad/nll_loss/backward/step, a test batch every 10 iterations via next(enumerate(loader)).
Bug: PointNetCls.forward returns F.log_softmax(x, dim=0) on a (batch, k) tensor, normalising over the batch instead of over the classes before F.nll_loss.
Thread: https://github.com/fxia22/pointnet.pytorch/issues/27
"""
import os
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data
from torch.autograd import Variable

from datasets import PartDataset


class STN3d(nn.Module):
    def __init__(self):
        super(STN3d, self).__init__()
        self.conv1 = nn.Conv1d(3, 64, 1)
        self.conv2 = nn.Conv1d(64, 128, 1)
        self.conv3 = nn.Conv1d(128, 1024, 1)
        self.fc1 = nn.Linear(1024, 512)
        self.fc2 = nn.Linear(512, 256)
        self.fc3 = nn.Linear(256, 9)
        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(128)
        self.bn3 = nn.BatchNorm1d(1024)
        self.bn4 = nn.BatchNorm1d(512)
        self.bn5 = nn.BatchNorm1d(256)

    def forward(self, x):
        n = x.size()[0]
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = torch.max(x, 2, keepdim=True)[0].view(-1, 1024)
        x = F.relu(self.bn4(self.fc1(x)))
        x = F.relu(self.bn5(self.fc2(x)))
        x = self.fc3(x)
        eye = Variable(torch.from_numpy(np.eye(3, dtype=np.float32).reshape(1, 9))).repeat(n, 1)
        if x.is_cuda:
            eye = eye.cuda()
        return (x + eye).view(-1, 3, 3)


class PointNetfeat(nn.Module):
    def __init__(self, global_feat=True):
        super(PointNetfeat, self).__init__()
        self.stn = STN3d()
        self.conv1 = nn.Conv1d(3, 64, 1)
        self.conv2 = nn.Conv1d(64, 128, 1)
        self.conv3 = nn.Conv1d(128, 1024, 1)
        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(128)
        self.bn3 = nn.BatchNorm1d(1024)
        self.global_feat = global_feat

    def forward(self, x):
        n_pts = x.size()[2]
        trans = self.stn(x)
        x = torch.bmm(x.transpose(2, 1), trans).transpose(2, 1)
        x = F.relu(self.bn1(self.conv1(x)))
        point_feat = x
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        x = torch.max(x, 2, keepdim=True)[0].view(-1, 1024)
        if self.global_feat:
            return x, trans
        x = x.view(-1, 1024, 1).repeat(1, 1, n_pts)
        return torch.cat([x, point_feat], 1), trans


class PointNetCls(nn.Module):
    def __init__(self, k=2):
        super(PointNetCls, self).__init__()
        self.feat = PointNetfeat(global_feat=True)
        self.fc1 = nn.Linear(1024, 512)
        self.fc2 = nn.Linear(512, 256)
        self.fc3 = nn.Linear(256, k)
        self.bn1 = nn.BatchNorm1d(512)
        self.bn2 = nn.BatchNorm1d(256)

    def forward(self, x):
        x, trans = self.feat(x)
        x = F.relu(self.bn1(self.fc1(x)))
        x = F.relu(self.bn2(self.fc2(x)))
        x = self.fc3(x)
        return F.log_softmax(x, dim=0), trans


batch_size = 32
n_points = 2500
n_epochs = 25
out_dir = "cls"
seed = random.randint(1, 10000)
random.seed(seed)
torch.manual_seed(seed)

train_set = PartDataset(root="shapenet_partseg", classification=True, npoints=n_points)
train_loader = torch.utils.data.DataLoader(train_set, batch_size=batch_size, shuffle=True, num_workers=4)
test_set = PartDataset(root="shapenet_partseg", classification=True, train=False, npoints=n_points)
test_loader = torch.utils.data.DataLoader(test_set, batch_size=batch_size, shuffle=True, num_workers=4)
n_classes = len(train_set.classes)
os.makedirs(out_dir, exist_ok=True)

net = PointNetCls(k=n_classes)
optimizer = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
net.cuda()

for epoch in range(n_epochs):
    for i, (pts, label) in enumerate(train_loader, 0):
        pts, label = Variable(pts), Variable(label[:, 0])
        pts = pts.transpose(2, 1).cuda()
        label = label.cuda()
        optimizer.zero_grad()
        net = net.train()
        log_probs, _ = net(pts)
        loss = F.nll_loss(log_probs, label)
        loss.backward()
        optimizer.step()
        hits = log_probs.data.max(1)[1].eq(label.data).cpu().sum()

        if i % 10 == 0:
            _, (pts, label) = next(enumerate(test_loader, 0))
            pts, label = Variable(pts), Variable(label[:, 0])
            pts, label = pts.transpose(2, 1).cuda(), label.cuda()
            net = net.eval()
            log_probs, _ = net(pts)
            test_loss = F.nll_loss(log_probs, label)
            test_hits = log_probs.data.max(1)[1].eq(label.data).cpu().sum()

    torch.save(net.state_dict(), "%s/cls_model_%d.pth" % (out_dir, epoch))
