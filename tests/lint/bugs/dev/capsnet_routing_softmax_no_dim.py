"""
Shape: CapsuleNetwork module (Conv1, PrimaryCaps of conv units, DigitCaps with iterative dynamic routing, Decoder) with its own loss()/margin_loss()/reconstruction_loss() methods; a flat main script with module-level model/optimizer (Adam) and train(epoch)/test(epoch) functions, manual lr decay per epoch.
Bug: DigitCaps routing computes c_ij = F.softmax(b_ij.unsqueeze(0)) with no dim on a 4-D tensor, so the implicit dim (1) normalises over the 1152 input capsules instead of the 10 output capsules.
Thread: https://github.com/motokimura/capsnet_pytorch/pull/1
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable
from torchvision import datasets, transforms


def squash(s, dim):
    sq = torch.sum(s ** 2, dim=dim, keepdim=True)
    return (sq / (1.0 + sq)) * (s / torch.sqrt(sq))


class Conv1(nn.Module):
    def __init__(self):
        super(Conv1, self).__init__()
        self.conv = nn.Conv2d(in_channels=1, out_channels=256, kernel_size=9, stride=1, bias=True)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.conv(x))


class ConvUnit(nn.Module):
    def __init__(self, in_channels, out_channels):
        super(ConvUnit, self).__init__()
        self.conv = nn.Conv2d(in_channels=in_channels, out_channels=out_channels, kernel_size=9, stride=2, bias=True)

    def forward(self, x):
        return self.conv(x)


class PrimaryCaps(nn.Module):
    def __init__(self):
        super(PrimaryCaps, self).__init__()
        self.capsule_units = 32
        self.capsule_size = 8

        def make_unit(k):
            unit = ConvUnit(in_channels=256, out_channels=self.capsule_size)
            self.add_module("unit_" + str(k), unit)
            return unit

        self.conv_units = [make_unit(k) for k in range(self.capsule_units)]

    def forward(self, x):
        n = x.size(0)
        u = []
        for k in range(self.capsule_units):
            u.append(self.conv_units[k](x).view(n, self.capsule_size, -1, 1))
        u = torch.cat(u, dim=3).view(n, self.capsule_size, -1).transpose(1, 2)
        return squash(u, dim=2)


class DigitCaps(nn.Module):
    def __init__(self, routing_iters, gpu):
        super(DigitCaps, self).__init__()
        self.routing_iters = routing_iters
        self.gpu = gpu
        self.in_capsules, self.in_size = 1152, 8
        self.out_capsules, self.out_size = 10, 16
        self.W = nn.Parameter(torch.randn(self.in_capsules, self.out_capsules, self.out_size, self.in_size))

    def forward(self, x):
        n = x.size(0)
        x = torch.stack([x] * self.out_capsules, dim=2)
        W = torch.cat([self.W.unsqueeze(0)] * n, dim=0)
        u_hat = torch.matmul(W, x.unsqueeze(4))
        u_hat_fixed = u_hat.detach()
        b_ij = Variable(torch.zeros(self.in_capsules, self.out_capsules, 1))
        if self.gpu >= 0:
            b_ij = b_ij.cuda(self.gpu)
        for it in range(self.routing_iters):
            c_ij = F.softmax(b_ij.unsqueeze(0))
            c_ij = torch.cat([c_ij] * n, dim=0).unsqueeze(4)
            if it == self.routing_iters - 1:
                v_j = squash((c_ij * u_hat).sum(dim=1, keepdim=True), dim=3)
            else:
                v_j = squash((c_ij * u_hat_fixed).sum(dim=1, keepdim=True), dim=3)
                agreement = torch.matmul(u_hat_fixed.transpose(3, 4), v_j).squeeze(4).mean(dim=0, keepdim=False)
                b_ij = b_ij + agreement
        return v_j.squeeze(4).squeeze(1)


class Decoder(nn.Module):
    def __init__(self):
        super(Decoder, self).__init__()
        self.linear0 = nn.Linear(160, 512)
        self.linear1 = nn.Linear(512, 1024)
        self.linear2 = nn.Linear(1024, 28 * 28)
        self.relu = nn.ReLU(inplace=True)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x):
        h = self.relu(self.linear1(self.relu(self.linear0(x))))
        return self.sigmoid(self.linear2(h)).view(-1, 1, 28, 28)


class CapsuleNetwork(nn.Module):
    def __init__(self, routing_iters, gpu):
        super(CapsuleNetwork, self).__init__()
        self.gpu = gpu
        self.conv1 = Conv1()
        self.primary_caps = PrimaryCaps()
        self.digit_caps = DigitCaps(routing_iters=routing_iters, gpu=gpu)
        self.decoder = Decoder()

    def forward(self, x):
        return self.digit_caps(self.primary_caps(self.conv1(x)))

    def loss(self, images, caps, target, size_average=True):
        m = self.margin_loss(caps, target, size_average)
        r = self.reconstruction_loss(images, caps, size_average)
        return m + r, m, r

    def margin_loss(self, caps, target, size_average=True):
        n = caps.size(0)
        length = torch.sqrt((caps ** 2).sum(dim=2, keepdim=True))
        zero = Variable(torch.zeros(1))
        if self.gpu >= 0:
            zero = zero.cuda(self.gpu)
        upper = torch.max(0.9 - length, zero).view(n, -1) ** 2
        lower = torch.max(length - 0.1, zero).view(n, -1) ** 2
        per_class = (target * upper + 0.5 * (1.0 - target) * lower).sum(dim=1)
        return per_class.mean() if size_average else per_class.sum()

    def reconstruction_loss(self, images, caps, size_average=True):
        n = images.size(0)
        err = ((self.reconstruct(caps) - images).view(n, -1) ** 2).sum(dim=1)
        err = err.mean() if size_average else err.sum()
        return err * 0.0005

    def reconstruct(self, caps):
        _, best = torch.sqrt((caps ** 2).sum(dim=2)).max(dim=1)
        best = best.data
        masked = []
        for i in range(caps.size(0)):
            keep = Variable(torch.zeros(caps[i].size()))
            if self.gpu >= 0:
                keep = keep.cuda(self.gpu)
            keep[best[i]] = caps[i][best[i]]
            masked.append(keep)
        return self.decoder(torch.stack(masked, dim=0).view(caps.size(0), -1))


gpu = 0
n_epochs = 50
lr_decay_factor = 0.9
torch.manual_seed(1)
train_set = datasets.MNIST("data", train=True, download=True, transform=transforms.Compose([
    transforms.RandomCrop(padding=2, size=(28, 28)), transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))]))
train_loader = torch.utils.data.DataLoader(train_set, batch_size=128, shuffle=True, num_workers=1, pin_memory=True)
test_set = datasets.MNIST("data", train=False, transform=transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))]))
test_loader = torch.utils.data.DataLoader(test_set, batch_size=128, shuffle=True, num_workers=1, pin_memory=True)

model = CapsuleNetwork(routing_iters=3, gpu=gpu)
if gpu >= 0:
    model = model.cuda(gpu)
optimizer = optim.Adam(model.parameters(), lr=0.01)


def to_one_hot(idx, length=10):
    out = torch.zeros(idx.size(0), length)
    for i in range(idx.size(0)):
        out[i, idx[i]] = 1.0
    return out


def decay_lr(epoch):
    for group in optimizer.param_groups:
        group["lr"] *= lr_decay_factor


def train(epoch):
    model.train()
    for batch_idx, (data, labels) in enumerate(train_loader):
        data, target = Variable(data), Variable(to_one_hot(labels))
        if gpu >= 0:
            data, target = data.cuda(gpu), target.cuda(gpu)
        optimizer.zero_grad()
        caps = model(data)
        loss, margin, recon = model.loss(data, caps, target)
        loss.backward()
        optimizer.step()
    decay_lr(epoch)


def test(epoch):
    model.eval()
    total, correct = 0.0, 0
    for data, labels in test_loader:
        data, target = Variable(data, volatile=True), Variable(to_one_hot(labels))
        if gpu >= 0:
            data, target = data.cuda(gpu), target.cuda(gpu)
        caps = model(data)
        loss, _, _ = model.loss(data, caps, target, size_average=False)
        total += loss.data[0]
        pred = torch.sqrt((caps ** 2).sum(dim=2, keepdim=True)).data.max(1, keepdim=True)[1].cpu()
        correct += pred.eq(labels.view_as(pred)).sum()
    return total / len(test_loader.dataset), correct


for epoch in range(n_epochs):
    train(epoch)
    test(epoch)
