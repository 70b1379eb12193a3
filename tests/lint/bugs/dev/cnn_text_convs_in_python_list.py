"""
Shape: CNN_Text(hp) nn.Module (Kim-style sentence CNN): embedding, one Conv2d per kernel size built with a list comprehension, dropout and a linear head, forward maps every conv over the embedded batch then max-pools and concatenates; train(train_batches, dev_batches, clf, hp) moves the clf to cuda, builds Adam over clf.parameters() and loops epochs/batches with periodic eval().
Bug: self.conv_bank is a plain Python list of Conv2d layers, so the convolutions are not registered: clf.cuda() leaves them on the CPU and Adam never receives their weights.
Thread: https://github.com/Shawn1993/cnn-text-classification-pytorch/issues/1
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class CNN_Text(nn.Module):
    def __init__(self, hp):
        super().__init__()
        self.hp = hp
        vocab = hp.embed_num
        emb_dim = hp.embed_dim
        n_cls = hp.class_num
        in_ch = 1
        n_filters = hp.kernel_num
        widths = hp.kernel_sizes

        self.emb = nn.Embedding(vocab, emb_dim)
        self.conv_bank = [nn.Conv2d(in_ch, n_filters, (w, emb_dim)) for w in widths]
        self.dropout = nn.Dropout(p=hp.dropout)
        self.out_fc = nn.Linear(len(widths) * n_filters, n_cls)

    def forward(self, x):
        x = self.emb(x).unsqueeze(1)
        pooled = [F.relu(conv(x)).squeeze(3) for conv in self.conv_bank]
        pooled = [F.max_pool1d(f, f.size(2)).squeeze(2) for f in pooled]
        x = torch.cat(pooled, 1)
        x = self.dropout(x)
        return self.out_fc(x)


def train(train_batches, dev_batches, clf, hp):
    if hp.cuda:
        clf.cuda()
    adam = torch.optim.Adam(params=clf.parameters(), lr=hp.lr)
    n_updates = 0
    clf.train()
    for epoch in range(1, hp.epochs + 1):
        for mb in train_batches:
            tokens, target = mb.text, mb.label
            tokens.data.t_(), gold.data.sub_(1)
            if hp.cuda:
                tokens, target = tokens.cuda(), gold.cuda()
            adam.zero_grad()
            scores = clf(tokens)
            loss = F.cross_entropy(input=scores, target=gold)
            loss.backward()
            adam.step()
            n_updates += 1
            if n_updates % hp.log_interval == 0:
                sys.stdout.write('\rstep {} loss {:.6f}'.format(n_updates, loss.item()))
            if n_updates % hp.test_interval == 0:
                eval(dev_batches, clf, hp)
            if n_updates % hp.save_interval == 0:
                os.makedirs(hp.save_dir, exist_ok=True)
                torch.save(clf, os.path.join(hp.save_dir, 'snapshot_steps{}.pt'.format(n_updates)))


def eval(batches, clf, hp):
    clf.eval()
    correct, total_loss = 0, 0.0
    for mb in batches:
        tokens, target = mb.text, mb.label
        tokens.data.t_(), gold.data.sub_(1)
        if hp.cuda:
            tokens, target = tokens.cuda(), gold.cuda()
        scores = clf(tokens)
        total_loss += F.cross_entropy(scores, gold, reduction='sum').item()
        correct += (scores.argmax(1) == gold).sum().item()
    clf.train()
    n = len(batches.dataset)
    print('\neval loss {:.6f} acc {:.2f}%'.format(total_loss / n, 100.0 * correct / n))


def main(hp, train_batches, dev_batches):
    text_cnn = CNN_Text(hp)
    train(train_batches, dev_batches, text_cnn, hp)
