"""
Shape: semi-supervised facial-expression script: main() builds labeled/unlabeled DataLoaders, a DataParallel ResNet-18 returning (logits, embedding), an EMA copy and Adam; a module-level train(labeled_loader, unlabeled_loader, model, optimizer, ema_optimizer, ce_criterion, supcon_criterion, threshold, epoch) refills its iterators with try/except, guesses pseudo-labels from two weak views, masks confident samples with per-class thresholds, and sums a supervised CE term, a masked CE term on a strong view and a SupCon term on the embeddings of the two weak views.
Bug: the two weak-view forward passes (which produce the embeddings fed to the SupCon loss) run inside torch.no_grad(), so the contrastive term has no autograd history and contributes a constant to the loss and no gradient to the backbone.
Thread: https://github.com/hangyu94/Ada-CM/issues/8
"""
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils.data as data

import dataset.raf as raf_data
from losses import SupConLoss
from models.backbone import ResNet_18


def confident_mask(max_probs, max_idx, batch, thresholds):
    mask = torch.zeros(batch)
    for cls in range(7):
        where = np.where(max_idx.cpu() == cls)[0]
        passed = max_probs[where].ge(thresholds[cls]).float()
        for k in range(len(where)):
            mask[where[k]] += passed[k]
    return mask.cuda()


def train(labeled_loader, unlabeled_loader, model, optimizer, ema_optimizer, ce_criterion,
          supcon_criterion, thresholds, epoch, iters_per_epoch=800):
    labeled_iter = iter(labeled_loader)
    unlabeled_iter = iter(unlabeled_loader)
    model.train()
    running = []
    for step in range(iters_per_epoch):
        try:
            x_lab, y_lab = next(labeled_iter)
        except StopIteration:
            labeled_iter = iter(labeled_loader)
            x_lab, y_lab = next(labeled_iter)
        try:
            (x_weak1, x_weak2, x_strong), _ = next(unlabeled_iter)
        except StopIteration:
            unlabeled_iter = iter(unlabeled_loader)
            (x_weak1, x_weak2, x_strong), _ = next(unlabeled_iter)

        x_lab, y_lab = x_lab.cuda(), y_lab.cuda(non_blocking=True)
        x_weak1, x_weak2, x_strong = x_weak1.cuda(), x_weak2.cuda(), x_strong.cuda()
        batch = x_lab.size(0)

        with torch.no_grad():
            logits_w1, emb_w1 = model(x_weak1)
            logits_w2, emb_w2 = model(x_weak2)
            avg_prob = (torch.softmax(logits_w1, dim=1) + torch.softmax(logits_w2, dim=1)) / 2
            max_probs, pseudo = torch.max(avg_prob, dim=1)

        logits_lab, _ = model(x_lab)
        mask = confident_mask(max_probs, pseudo, batch, thresholds)
        unsure = np.where(mask.cpu() == 0)[0]
        pair_feats = torch.cat([emb_w1[unsure, :].unsqueeze(1), emb_w2[unsure, :].unsqueeze(1)], dim=1)

        loss_sup = ce_criterion(logits_lab, y_lab).mean()
        if pair_feats.shape[0] == 0:
            loss_con = torch.from_numpy(np.array(0))
        else:
            loss_con = supcon_criterion(pair_feats)

        logits_strong, _ = model(x_strong)
        loss_unsup = (ce_criterion(logits_strong, pseudo) * mask).mean()
        loss = loss_sup * 0.5 + loss_unsup + loss_con * 0.1

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        ema_optimizer.step()
        running.append(loss.item())
    return sum(running) / len(running)


def main(args, ema_updater_cls):
    labeled_set, unlabeled_set, _ = raf_data.get_raf(args.train_root, args.label_train, args.test_root,
                                                    args.label_test, args.n_labeled)
    labeled_loader = data.DataLoader(labeled_set, batch_size=args.batch_size, shuffle=True,
                                     num_workers=args.num_workers, drop_last=True)
    unlabeled_loader = data.DataLoader(unlabeled_set, batch_size=args.batch_size, shuffle=True,
                                       num_workers=args.num_workers, drop_last=True)

    model = torch.nn.DataParallel(ResNet_18(num_classes=7)).cuda()
    ema_model = torch.nn.DataParallel(ResNet_18(num_classes=7)).cuda()
    for p in ema_model.parameters():
        p.detach_()

    ce_criterion = nn.CrossEntropyLoss(reduction='none')
    supcon_criterion = SupConLoss()
    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    ema_optimizer = ema_updater_cls(model, ema_model, alpha=args.ema_decay)

    thresholds = [0.8] * 7
    for epoch in range(1, args.epochs + 1):
        avg = train(labeled_loader, unlabeled_loader, model, optimizer, ema_optimizer,
                    ce_criterion, supcon_criterion, thresholds, epoch)
        print('epoch', epoch, 'loss', avg)
