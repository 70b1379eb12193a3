"""
Shape: train(args, io) function building ModelNet40 loaders, Pct(args).to(dev) wrapped in DataParallel, SGD or Adam by args.use_sgd, CosineAnnealingLR; epoch loop with the scheduler stepped first, then the batch loop, then an in-line test pass.
Bug: scheduler.step() is the first statement of each epoch, before the batch loop that calls opt.step().
Thread: https://github.com/Strawberry-Eat-Mango/PCT_Pytorch/issues/21
"""
import numpy as np
import sklearn.metrics as metrics
import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim.lr_scheduler import CosineAnnealingLR
from torch.utils.data import DataLoader

from data import ModelNet40
from model import Pct
from util import IOStream, cal_loss


def train(args, io):
    tr_loader = DataLoader(ModelNet40(partition='train', num_points=args.num_points),
                           num_workers=8, batch_size=args.batch_size, shuffle=True, drop_last=True)
    te_loader = DataLoader(ModelNet40(partition='test', num_points=args.num_points),
                           num_workers=8, batch_size=args.test_batch_size, shuffle=True, drop_last=False)
    dev = torch.device("cuda" if args.cuda else "cpu")

    net = Pct(args).to(dev)
    net = nn.DataParallel(net)

    if args.use_sgd:
        optimizer = optim.SGD(net.parameters(), lr=args.lr * 100, momentum=args.momentum,
                              weight_decay=5e-4)
    else:
        optimizer = optim.Adam(net.parameters(), lr=args.lr, weight_decay=1e-4)

    sched = CosineAnnealingLR(optimizer, args.epochs, eta_min=args.lr)
    loss_fn = cal_loss
    best_acc = 0.0

    for ep in range(args.epochs):
        sched.step()
        seen = 0.0
        loss_total = 0.0
        net.train()
        ys, ps = [], []
        for pts, lbl in tr_loader:
            pts, lbl = pts.to(dev), lbl.to(dev).squeeze()
            pts = pts.permute(0, 2, 1)
            bs = pts.size()[0]
            optimizer.zero_grad()
            logits = net(pts)
            loss = loss_fn(logits, lbl)
            loss.backward()
            optimizer.step()
            seen += bs
            loss_total += loss.item() * bs
            ys.append(lbl.cpu().numpy())
            ps.append(logits.max(dim=1)[1].detach().cpu().numpy())
        io.cprint('train %d loss %.6f acc %.6f' % (
            ep, loss_total / seen,
            metrics.accuracy_score(np.concatenate(ys), np.concatenate(ps))))

        net.eval()
        ys, ps = [], []
        for pts, lbl in te_loader:
            pts, lbl = pts.to(dev), lbl.to(dev).squeeze()
            pts = pts.permute(0, 2, 1)
            logits = net(pts)
            ys.append(lbl.cpu().numpy())
            ps.append(logits.max(dim=1)[1].detach().cpu().numpy())
        acc = metrics.accuracy_score(np.concatenate(ys), np.concatenate(ps))
        io.cprint('test %d acc %.6f' % (ep, acc))
        if acc >= best_acc:
            best_acc = acc
            torch.save(net.state_dict(), 'checkpoints/%s/models/model.t7' % args.exp_name)
