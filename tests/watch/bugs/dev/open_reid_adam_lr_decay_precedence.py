"""A person re-identification example script trained with a batch-hard triplet loss: main(args)
builds an embedding network (a small stand-in for the ResNet trunk plus a feature layer), a
RandomIdentitySampler that puts P identities x K images in each batch, a TripletLoss module that
mines the hardest positive and negative per anchor and feeds them to MarginRankingLoss, Adam, and a
Trainer class whose train(epoch, data_loader, optimizer) runs zero_grad/backward/step. An
adjust_lr(epoch) closure sets every param group's lr before each epoch: constant for the first
two thirds of training, then meant to decay smoothly to 0.001x by the last epoch. The exponent is
written without its parentheses, `0.001 ** (epoch - hold) / span`, so the first decayed epoch
already runs at lr * 0.001 / span and each later epoch multiplies it by another 0.001: the last
third of training runs at an lr that is effectively zero.

Thread: https://github.com/Cysu/open-reid/pull/5
"""
from collections import defaultdict

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Sampler

torch.manual_seed(1)
np.random.seed(1)


class PersonImages(Dataset):
    """Each identity has a prototype appearance; its images are noisy views of it."""

    def __init__(self, num_ids=40, per_id=8, dim=48, seed=0):
        g = torch.Generator().manual_seed(seed)
        protos = torch.randn(num_ids, dim, generator=g)
        self.items = []
        for pid in range(num_ids):
            for cam in range(per_id):
                img = protos[pid] + 0.9 * torch.randn(dim, generator=g)
                self.items.append((img, pid, cam % 2))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class RandomIdentitySampler(Sampler):
    def __init__(self, data_source, num_instances=4):
        self.num_instances = num_instances
        self.by_pid = defaultdict(list)
        for idx, (_, pid, _) in enumerate(data_source.items):
            self.by_pid[pid].append(idx)
        self.pids = sorted(self.by_pid)

    def __len__(self):
        return len(self.pids) * self.num_instances

    def __iter__(self):
        out = []
        for i in torch.randperm(len(self.pids)).tolist():
            pool = self.by_pid[self.pids[i]]
            out.extend(np.random.choice(pool, size=self.num_instances,
                                        replace=len(pool) < self.num_instances).tolist())
        return iter(out)


class EmbeddingNet(nn.Module):
    def __init__(self, in_dim=48, hidden=128, num_features=64, dropout=0.1):
        super().__init__()
        self.base = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.feat = nn.Linear(hidden, num_features)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.feat(self.drop(self.base(x)))


class TripletLoss(nn.Module):
    def __init__(self, margin=0.5):
        super().__init__()
        self.ranking = nn.MarginRankingLoss(margin=margin)

    def forward(self, emb, pids):
        sq = emb.pow(2).sum(1, keepdim=True)
        dist = (sq + sq.t() - 2 * emb @ emb.t()).clamp(min=1e-12).sqrt()
        same = pids.unsqueeze(0) == pids.unsqueeze(1)
        hardest_pos = torch.stack([dist[i][same[i]].max() for i in range(len(pids))])
        hardest_neg = torch.stack([dist[i][~same[i]].min() for i in range(len(pids))])
        loss = self.ranking(hardest_neg, hardest_pos, torch.ones_like(hardest_neg))
        prec = (hardest_neg > hardest_pos).float().mean().item()
        return loss, prec


class Trainer:
    def __init__(self, model, criterion):
        self.model = model
        self.criterion = criterion

    def train(self, epoch, data_loader, optimizer):
        self.model.train()
        losses, precs = [], []
        for imgs, pids, _ in data_loader:
            loss, prec = self.criterion(self.model(imgs), pids)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            precs.append(prec)
        print(f"Epoch [{epoch}] lr {optimizer.param_groups[0]['lr']:.2e} "
              f"loss {np.mean(losses):.4f} prec {np.mean(precs):.2%}")


def rank1(model, dataset):
    model.eval()
    with torch.no_grad():
        x = torch.stack([it[0] for it in dataset.items])
        pids = torch.tensor([it[1] for it in dataset.items])
        f = model(x)
        d = torch.cdist(f, f)
        d.fill_diagonal_(float("inf"))
        return (pids[d.argmin(1)] == pids).float().mean().item()


def main(epochs=15, hold=10, span=5, lr=1e-3, batch_size=32, num_instances=4):
    train_set = PersonImages(seed=0)
    val_set = PersonImages(num_ids=20, seed=1)
    train_loader = DataLoader(train_set, batch_size=batch_size,
                              sampler=RandomIdentitySampler(train_set, num_instances), drop_last=True)
    model = EmbeddingNet()
    criterion = TripletLoss(margin=0.5)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=5e-4)
    trainer = Trainer(model, criterion)

    def adjust_lr(epoch):
        new_lr = lr if epoch <= hold else lr * (0.001 ** (epoch - hold) / span)
        for g in optimizer.param_groups:
            g["lr"] = new_lr * g.get("lr_mult", 1)

    for epoch in range(epochs):
        adjust_lr(epoch)
        trainer.train(epoch, train_loader, optimizer)
        print(f" * Finished epoch {epoch:3d}  val top1: {rank1(model, val_set):5.1%}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
