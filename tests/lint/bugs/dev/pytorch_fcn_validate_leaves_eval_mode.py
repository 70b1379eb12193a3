"""
Shape: Trainer class; train_epoch() sets train mode once, then calls self.validate() every N iterations mid-epoch; validate() switches to eval and returns.
Bug: validate() calls self.model.eval() and nothing puts the model back in train mode for the rest of the epoch.
Thread: https://github.com/wkentaro/pytorch-fcn/issues/57
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch.autograd import Variable

import torchfcn


def seg_cross_entropy(logits, labels, weight=None, avg_size=True):
    n, c, h, w = logits.size()
    logp = F.log_softmax(logits, dim=1)
    logp = logp.transpose(1, 2).transpose(2, 3).contiguous().view(-1, c)
    logp = logp[labels.view(n, h, w, 1).repeat(1, 1, 1, c) >= 0].view(-1, c)
    valid = labels >= 0
    labels = labels[valid]
    total = F.nll_loss(logp, labels, weight=weight, reduction='sum')
    if avg_size:
        total = total / valid.data.sum()
    return total


class Trainer(object):

    def __init__(self, cuda, model, optimizer, train_dl, val_dl,
                 out, it_limit, avg_size=False, val_every=None):
        self.cuda = cuda
        self.model = model
        self.optim = optimizer
        self.train_dl = train_dl
        self.val_dl = val_dl
        self.out = out
        self.avg_size = avg_size
        if val_every is None:
            self.val_every = len(self.train_dl)
        else:
            self.val_every = val_every
        self.epoch = 0
        self.it = 0
        self.it_limit = it_limit
        self.best_mean_iu = 0

    def validate(self):
        self.model.eval()
        ncls = len(self.val_dl.dataset.class_names)
        total_loss = 0
        gts, preds = [], []
        for imgs, lbl in self.val_dl:
            if self.cuda:
                imgs, lbl = imgs.cuda(), lbl.cuda()
            imgs, lbl = Variable(imgs, volatile=True), Variable(lbl)
            score = self.model(imgs)
            loss = seg_cross_entropy(score, lbl, avg_size=self.avg_size)
            total_loss += float(loss.data[0]) / len(imgs)
            preds.extend(score.data.max(1)[1].cpu().numpy())
            gts.extend(lbl.data.cpu().numpy())
        scores = torchfcn.utils.label_accuracy_score(gts, preds, ncls)
        total_loss /= len(self.val_dl)
        if scores[2] > self.best_mean_iu:
            self.best_mean_iu = scores[2]
            torch.save({'model_state_dict': self.model.state_dict(),
                        'optim_state_dict': self.optim.state_dict()},
                       self.out + '/model_best.pth.tar')

    def train_epoch(self):
        self.model.train()
        for bidx, (imgs, lbl) in enumerate(self.train_dl):
            it = bidx + self.epoch * len(self.train_dl)
            if self.it != 0 and (it - 1) != self.it:
                continue
            self.it = it

            if self.it % self.val_every == 0:
                self.validate()

            if self.cuda:
                imgs, lbl = imgs.cuda(), lbl.cuda()
            imgs, lbl = Variable(imgs), Variable(lbl)
            self.optim.zero_grad()
            score = self.model(imgs)
            loss = seg_cross_entropy(score, lbl, avg_size=self.avg_size)
            loss /= len(imgs)
            if np.isnan(float(loss.data[0])):
                raise ValueError('training loss became nan')
            loss.backward()
            self.optim.step()

            if self.it >= self.it_limit:
                break

    def train(self):
        n_epochs = int(math.ceil(1. * self.it_limit / len(self.train_dl)))
        for epoch in range(self.epoch, n_epochs):
            self.epoch = epoch
            self.train_epoch()
            if self.it >= self.it_limit:
                break
