"""
Shape: session-recommendation model: ItemConv and SessConv Modules keep their per-layer nn.Linear weights in a dict attribute filled in a loop ('weight_item%d' keys) and apply them through to_gpu(...) in forward; COTREC builds both plus embeddings and creates its own Adam over self.parameters() in __init__; a module-level forward(rec, k, dataset, epoch, train) helper and train_test(rec, tr_data, te_data, epoch) run the epoch (rec.zero_grad, backward, rec.optimizer.step) and the top-K evaluation.
Bug: self.w_item / self.w_sess are plain Python dicts of nn.Linear, so those graph-convolution weights are not registered, are missing from self.parameters() and are never updated by Adam.
Thread: https://github.com/xiaxin1998/COTREC/issues/15
"""
import datetime
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn import Module


def to_gpu(t):
    return t.cuda() if torch.cuda.is_available() else t


def to_host(t):
    return t.cpu() if torch.cuda.is_available() else t


class ItemConv(Module):
    def __init__(self, n_layers, dim=100):
        super().__init__()
        self.dim = dim
        self.n_layers = n_layers
        self.w_item = {}
        for k in range(self.n_layers):
            self.w_item['weight_item%d' % (k)] = nn.Linear(self.dim, self.dim, bias=False)

    def forward(self, adj_coo, emb_table):
        idx = torch.LongTensor(np.vstack((adj_coo.row, adj_coo.col)))
        adj = torch.sparse.FloatTensor(idx, torch.FloatTensor(adj_coo.data), torch.Size(adj_coo.shape))
        h = emb_table
        layer_outs = [h]
        for k in range(self.n_layers):
            h = to_gpu(self.w_item['weight_item%d' % (k)])(h)
            h = torch.sparse.mm(to_gpu(adj), h)
            layer_outs.append(F.normalize(h, dim=-1, p=2))
        return torch.stack(layer_outs, 0).sum(0) / (self.n_layers + 1)


class SessConv(Module):
    def __init__(self, n_layers, bs, dim=100):
        super().__init__()
        self.dim = dim
        self.bs = bs
        self.n_layers = n_layers
        self.w_sess = {}
        for k in range(self.n_layers):
            self.w_sess['weight_sess%d' % (k)] = nn.Linear(self.dim, self.dim, bias=False)

    def forward(self, item_table, D, A, sess_items, sess_len):
        pad = torch.zeros(1, self.dim, device=item_table.device)
        item_table = torch.cat([pad, item_table], 0)
        seq = torch.stack([torch.index_select(item_table, 0, s) for s in sess_items])
        s = torch.div(torch.sum(seq, 1), sess_len)
        layer_outs = [s]
        norm_adj = torch.mm(D, A).float()
        for k in range(self.n_layers):
            s = to_gpu(self.w_sess['weight_sess%d' % (k)])(s)
            s = torch.mm(norm_adj, s)
            layer_outs.append(F.normalize(s, p=2, dim=-1))
        return torch.stack(layer_outs, 0).sum(0) / (self.n_layers + 1)


class COTREC(Module):
    def __init__(self, adj_coo, n_items, lr, n_layers, l2, ssl_weight, dim=100, bs=100):
        super().__init__()
        self.dim = dim
        self.bs = bs
        self.n_items = n_items
        self.l2_reg = l2
        self.lr = lr
        self.n_layers = n_layers
        self.ssl_weight = ssl_weight
        self.adj_coo = adj_coo
        self.emb_table = nn.Embedding(self.n_items, self.dim)
        self.item_gcn = ItemConv(self.n_layers)
        self.sess_gcn = SessConv(self.n_layers, self.bs)
        self.proj = nn.Linear(self.dim, self.dim)
        self.xent = nn.CrossEntropyLoss(reduction='mean')
        self.optimizer = torch.optim.Adam(params=self.parameters(), lr=self.lr)
        self.reset_params()  # uniform init

    def reset_params(self):
        bound = 1.0 / math.sqrt(self.dim)
        for w in self.parameters():
            w.data.uniform_(-bound, bound)

    def forward(self, sess_items, sess_len, D, A, targets):
        item_emb = self.item_gcn(self.adj_coo, self.emb_table.weight)
        sess_emb = self.sess_gcn(self.emb_table.weight, D, A, sess_items, sess_len)
        logits = torch.mm(self.proj(sess_emb), item_emb.t())
        rec_loss = self.xent(logits, targets)
        ssl_loss = self.ssl_weight * self.SSL(sess_emb, self.proj(sess_emb))
        return ssl_loss, rec_loss, logits

    def SSL(self, sess_a, sess_b):
        raise NotImplementedError


def forward(rec, k, dataset, epoch, train):
    targets, sess_len, sess_items, _, _, _ = dataset.get_slice(k)
    overlap_a, overlap_d = dataset.get_overlap(sess_items)
    sess_items = to_gpu(torch.Tensor(sess_items).long())
    sess_len = to_gpu(torch.Tensor(sess_len).long())
    overlap_a = to_gpu(torch.Tensor(overlap_a))
    overlap_d = to_gpu(torch.Tensor(overlap_d))
    targets = to_gpu(torch.Tensor(targets).long())
    ssl_loss, rec_loss, logits = rec(sess_items, sess_len, overlap_d, overlap_a, targets)
    return targets, logits, ssl_loss, rec_loss


def train_test(rec, tr_data, te_data, epoch):
    print("training started at", datetime.datetime.now())
    loss_sum = 0.0
    for k in tr_data.generate_batch(rec.bs):
        rec.zero_grad()
        targets, logits, ssl_loss, rec_loss = forward(rec, k, tr_data, epoch, train=True)
        loss = rec_loss + ssl_loss
        loss.backward()
        rec.optimizer.step()
        loss_sum += loss.item()

    hit_list = []
    rec.eval()
    for k in te_data.generate_batch(rec.bs):
        targets, logits, _, _ = forward(rec, k, te_data, epoch, train=False)
        top = to_host(logits).detach().topk(20, dim=1).indices.numpy()
        hit_list.extend(np.isin(t, p) for p, t in zip(top, to_host(targets).numpy()))
    return float(np.mean(hit_list)), loss_sum
