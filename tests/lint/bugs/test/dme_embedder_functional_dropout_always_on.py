"""
Shape: embedder modules configured from an opts namespace: SingleEmbedder wraps a frozen nn.Embedding; CatEmbedder concatenates several of them (nn.ModuleDict) and ProjSumEmbedder projects each with an nn.Linear and sums them with optional LSTM/Linear attention; both forwards end with an optional relu and `if self.opts.embed_drop_p > 0.0:` functional dropout.
Bug: F.dropout(h, ...embed_drop_p) is called in both forwards without training=self.training, so embedding dropout stays on when the model is evaluated.
Thread: https://github.com/facebookresearch/DME/issues/3
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from tasks.BaseTask import nn_init


class SingleEmbedder(nn.Module):
    def __init__(self, opts, pretrained, dim_in):
        super().__init__()
        self.opts = opts
        self.lookup = nn.Embedding(len(opts.vocab_stoi), dim_in, padding_idx=opts.vocab_stoi['<pad>'])
        lim = math.sqrt(3.0 / dim_in)
        self.lookup.weight.data.uniform_(-lim, lim)
        if pretrained is not None:
            self.lookup.weight.data.copy_(pretrained)
        self.lookup.cuda()
        self.lookup.weight.requires_grad = False

    def forward(self, x):
        return self.lookup(x)


class CatEmbedder(nn.Module):
    def __init__(self, opts, pretrained):
        super().__init__()
        self.opts = opts
        self.out_dim = sum(dim for _, _, dim in opts.embeds)
        self.src_names = sorted(name for name, _, _ in opts.embeds)
        self.lookups = nn.ModuleDict({
            name: SingleEmbedder(opts, pretrained.get(name), dim) for name, _, dim in opts.embeds
        })

    def forward(self, tokens):
        h = torch.cat([self.lookups[n](tokens) for n in self.src_names], -1)
        if self.opts.activation == 'relu':
            h = torch.relu(h)
        if self.opts.embed_drop_p > 0.0:
            h = F.dropout(h, self.opts.embed_drop_p)
        return h


class ProjSumEmbedder(nn.Module):
    def __init__(self, opts, pretrained):
        super().__init__()
        self.opts = opts
        self.num_src = len(opts.embeds)
        self.out_dim = opts.proj_dim
        self.src_names = sorted(name for name, _, _ in opts.embeds)
        self.lookups = nn.ModuleDict()
        self.proj = nn.ModuleDict()
        for name, _, dim in opts.embeds:
            self.lookups.update({name: SingleEmbedder(opts, pretrained.get(name), dim)})
            self.proj.update({name: nn.Linear(dim, opts.proj_dim).cuda()})
            nn_init(self.proj[name], 'xavier')

        self.gate_in, self.gate_out = None, None
        if self.num_src > 1 and opts.attn_mode != 'none':
            if opts.attn_mode.startswith('dep_'):
                self.gate_in = nn.LSTM(opts.proj_dim, 2, bidirectional=True)
                self.gate_out = nn.Linear(4, 1)
            else:
                self.gate_in = nn.Linear(opts.proj_dim, 2)
                self.gate_out = nn.Linear(2, 1)

    def forward(self, tokens):
        proj = [self.proj[n](self.lookups[n](tokens)) for n in self.src_names]
        if self.opts.attn_mode == 'none':
            h = sum(proj)
        else:
            stacked = torch.cat([p.unsqueeze(2) for p in proj], 2)
            s_len, bsz, _, _ = stacked.size()
            if self.opts.attn_mode.startswith('dep_'):
                a = self.gate_out(self.gate_in(stacked.view(s_len, bsz * self.num_src, -1))[0])
                a = a.view(s_len, bsz, self.num_src)
            else:
                a = self.gate_out(self.gate_in(stacked)).squeeze(3)
            if self.opts.attn_mode.endswith('_gating'):
                a = torch.sigmoid(a)
            else:
                a = F.softmax(a, dim=2)
            h = (stacked * a.view(s_len, bsz, self.num_src, 1).expand_as(stacked)).sum(2)

        if self.opts.activation == 'relu':
            h = F.relu(h)
        if self.opts.embed_drop_p > 0.0:
            h = F.dropout(h, p=self.opts.embed_drop_p)
        return h
