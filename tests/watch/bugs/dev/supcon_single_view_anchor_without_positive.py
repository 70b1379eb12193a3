"""Supervised contrastive training of an embedding encoder with a SupConLoss(temperature) module that
takes features of shape [bsz, n_views, dim] and labels, builds the same-label mask, removes the
self-contrast entries and averages the log-probability over each anchor's positives with
(mask * log_prob).sum(1) / mask.sum(1). The encoder produces one embedding per sample, so a
train(train_loader, model, criterion, optimizer, epoch, opt) function passes the normalised
features as [bsz, 1, dim]. With a single view, an anchor whose label occurs only once in the batch
has no positive at all: mask.sum(1) is 0, the division is 0/0, the loss is NaN, and the backward
pass writes NaN into every weight. Nothing raises.

Thread: https://github.com/HobbitLong/SupContrast/pull/142
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class SupConLoss(nn.Module):
    def __init__(self, temperature=0.07, base_temperature=0.07):
        super().__init__()
        self.temperature = temperature
        self.base_temperature = base_temperature

    def forward(self, features, labels):
        batch_size, n_views = features.shape[0], features.shape[1]
        mask = torch.eq(labels.view(-1, 1), labels.view(1, -1)).float()
        contrast_feature = torch.cat(torch.unbind(features, dim=1), dim=0)
        anchor_dot_contrast = contrast_feature @ contrast_feature.T / self.temperature
        logits = anchor_dot_contrast - anchor_dot_contrast.max(dim=1, keepdim=True)[0].detach()
        mask = mask.repeat(n_views, n_views)
        logits_mask = 1.0 - torch.eye(batch_size * n_views)
        mask = mask * logits_mask
        exp_logits = torch.exp(logits) * logits_mask
        log_prob = logits - torch.log(exp_logits.sum(1, keepdim=True) + 1e-9)
        mean_log_prob_pos = (mask * log_prob).sum(1) / mask.sum(1)
        loss = -(self.temperature / self.base_temperature) * mean_log_prob_pos
        return loss.view(n_views, batch_size).mean()


class SupConMLP(nn.Module):
    def __init__(self, dim_in=32, feat_dim=16):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim_in, 64), nn.BatchNorm1d(64), nn.ReLU(),
                                     nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, feat_dim))

    def forward(self, x):
        return F.normalize(self.head(self.encoder(x)), dim=1)


class AverageMeter:
    def __init__(self):
        self.sum, self.count = 0.0, 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n

    @property
    def avg(self):
        return self.sum / max(self.count, 1)


def adjust_learning_rate(opt, optimizer, epoch):
    lr = opt["learning_rate"] * 0.5 * (1 + math.cos(math.pi * epoch / opt["epochs"]))
    for group in optimizer.param_groups:
        group["lr"] = lr


def train(train_loader, model, criterion, optimizer, epoch, opt):
    model.train()
    losses = AverageMeter()
    for idx, (features_in, labels) in enumerate(train_loader):
        bsz = labels.shape[0]
        features = model(features_in).unsqueeze(1)
        loss = criterion(features, labels)
        losses.update(loss.item(), bsz)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (idx + 1) % opt["print_freq"] == 0:
            print(f"Train: [{epoch}][{idx + 1}/{len(train_loader)}]\tloss {loss.item():.3f} ({losses.avg:.3f})")
    return losses.avg


def make_data(n=1280, seed=0):
    g = torch.Generator().manual_seed(seed)
    centers = 2.0 * torch.randn(10, 32, generator=torch.Generator().manual_seed(9))
    y = torch.randint(0, 10, (n,), generator=g)
    return TensorDataset(centers[y] + torch.randn(n, 32, generator=g), y)


def main():
    torch.manual_seed(0)
    opt = {"learning_rate": 0.05, "epochs": 4, "print_freq": 5, "batch_size": 64}
    train_loader = DataLoader(make_data(), batch_size=opt["batch_size"], shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    model = SupConMLP()
    criterion = SupConLoss(temperature=0.1)
    optimizer = torch.optim.SGD(model.parameters(), lr=opt["learning_rate"], momentum=0.9, weight_decay=1e-4)
    for epoch in range(1, opt["epochs"] + 1):
        adjust_learning_rate(opt, optimizer, epoch - 1)
        loss = train(train_loader, model, criterion, optimizer, epoch, opt)
        print(f"epoch {epoch}, lr {optimizer.param_groups[0]['lr']:.4f}, loss {loss:.3f}")


if __name__ == "__main__":
    main()
