"""
Shape: An ERFNet lane segmentation network with an auxiliary lane-existence branch (ModuleList convs,
channel softmax, max-pool, two Linear layers) returning (seg_logits, exist_out); main() builds a
weighted NLLLoss(...).cuda() for the segmentation map (fed log_softmax) and a
BCEWithLogitsLoss().cuda() for lane existence, SGD with momentum, and a train() helper taking model,
both criteria and the optimizer sums the two losses.
Bug: the existence branch ends with F.sigmoid, and its probabilities go straight into
BCEWithLogitsLoss, which applies a sigmoid again; the sigmoid should only be applied at test time.
Thread: https://github.com/cardwing/Codes-for-Lane-Detection/issues/289
"""
import torch
from torch import nn
from torch.nn import functional as F


class LaneExistHead(nn.Module):
    def __init__(self, n_lanes):
        super().__init__()
        self.pre = nn.ModuleList()
        self.pre.append(nn.Conv2d(128, 32, 3, stride=1, padding=4, dilation=4, bias=False))
        self.pre.append(nn.BatchNorm2d(32, eps=0.001))
        self.post = nn.ModuleList()
        self.post.append(nn.Dropout2d(p=0.1))
        self.post.append(nn.Conv2d(32, 5, kernel_size=1, bias=True))
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.fc1 = nn.Linear(3965, 128)
        self.fc2 = nn.Linear(128, n_lanes)

    def forward(self, feats):
        h = feats
        for mod in self.pre:
            h = mod(h)
        h = F.relu(h)
        for mod in self.post:
            h = mod(h)
        h = self.pool(F.softmax(h, dim=1))
        h = h.view(-1, 3965)
        h = self.fc2(F.relu(self.fc1(h)))
        return F.sigmoid(h)


class ErfLaneNet(nn.Module):
    def __init__(self, n_classes, enc, dec):
        super().__init__()
        self.enc = enc
        self.dec = dec
        self.exist_head = LaneExistHead(4)

    def forward(self, x):
        feats = self.enc(x)
        return self.dec(feats), self.exist_head(feats)


class RunningMean(object):
    def __init__(self):
        self.total, self.n, self.avg = 0.0, 0, 0.0

    def add(self, value, k=1):
        self.total += value * k
        self.n += k
        self.avg = self.total / self.n


def train(loader, model, seg_crit, exist_crit, optimizer, epoch):
    seg_meter, exist_meter = RunningMean(), RunningMean()
    model.train()
    for it, (imgs, seg_gt, exist_gt) in enumerate(loader):
        imgs, seg_gt = imgs.cuda(), seg_gt.cuda()
        exist_gt = exist_gt.float().cuda()
        seg_out, exist_out = model(imgs)
        seg_loss = seg_crit(F.log_softmax(seg_out, dim=1), seg_gt)
        exist_loss = exist_crit(exist_out, exist_gt)
        total = seg_loss + 0.1 * exist_loss
        seg_meter.add(seg_loss.item(), imgs.size(0))
        exist_meter.add(exist_loss.item(), imgs.size(0))
        optimizer.zero_grad()
        total.backward()
        optimizer.step()
        if it % 10 == 0:
            print(epoch, it, seg_meter.avg, exist_meter.avg)


def set_lr(optimizer, epoch, base_lr, milestones):
    scale = 0.1 ** sum(epoch >= m for m in milestones)
    for group in optimizer.param_groups:
        group['lr'] = base_lr * scale


def main(args, enc, dec, loader, ignore_label=255):
    model = nn.DataParallel(ErfLaneNet(5, enc, dec)).cuda()
    cls_w = [0.4] + [1.0] * 4
    cls_w = torch.FloatTensor(cls_w).cuda()
    seg_crit = nn.NLLLoss(weight=cls_w, ignore_index=ignore_label).cuda()
    exist_crit = nn.BCEWithLogitsLoss().cuda()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    for epoch in range(args.epochs):
        set_lr(optimizer, epoch, args.lr, args.lr_steps)
        train(loader, model, seg_crit, exist_crit, optimizer, epoch)
