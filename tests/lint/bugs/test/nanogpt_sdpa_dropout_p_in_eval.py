"""
Shape: single-file GPT: CausalSelfAttention keeps nn.Dropout modules for the manual path and a float self.dropout for the use_sdpa path (torch.nn.functional.scaled_dot_product_attention when available), MLP/Block/GPT with a ModuleDict trunk; the training script's estimate_loss() switches model.eval(), averages train/val losses under no_grad and switches back to train().
Bug: the use_sdpa path passes dropout_p=self.dropout to scaled_dot_product_attention unconditionally (not gated on self.training), so attention dropout stays on during model.eval() evaluation.
Thread: https://github.com/karpathy/nanoGPT/pull/240
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F


@dataclass
class GPTConfig:
    ctx_len: int = 1024
    vocab: int = 50304
    depth: int = 12
    heads: int = 12
    width: int = 768
    dropout: float = 0.0
    bias: bool = True


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        assert not cfg.width % cfg.heads
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width, bias=cfg.bias)
        self.out_proj = nn.Linear(cfg.width, cfg.width, bias=cfg.bias)
        self.attn_drop = nn.Dropout(cfg.dropout)
        self.resid_drop = nn.Dropout(cfg.dropout)
        self.heads = cfg.heads
        self.width = cfg.width
        self.dropout = float(cfg.dropout)
        self.use_sdpa = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
        if not self.use_sdpa:
            self.register_buffer("bias", torch.tril(torch.ones(cfg.ctx_len, cfg.ctx_len))
                                 .view(1, 1, cfg.ctx_len, cfg.ctx_len))

    def forward(self, x):
        bsz, seq, dim = x.size()
        q, k, v = self.qkv(x).split(self.width, dim=2)
        k = k.view(bsz, seq, self.heads, dim // self.heads).transpose(1, 2)
        q = q.view(bsz, seq, self.heads, dim // self.heads).transpose(1, 2)
        v = v.view(bsz, seq, self.heads, dim // self.heads).transpose(1, 2)
        if self.use_sdpa:
            ctx = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                                                 dropout_p=self.dropout, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            scores = scores.masked_fill(self.bias[:, :, :seq, :seq] == 0, float('-inf'))
            scores = scores.softmax(dim=-1)
            scores = self.attn_drop(scores)  # manual path
            ctx = scores @ v
        ctx = ctx.transpose(1, 2).contiguous().view(bsz, seq, dim)
        return self.resid_drop(self.out_proj(ctx))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.up = nn.Linear(cfg.width, 4 * cfg.width, bias=cfg.bias)
        self.out_proj = nn.Linear(4 * cfg.width, cfg.width, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.dropout(self.out_proj(F.gelu(self.up(x))))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.width)
        self.mixer = CausalSelfAttention(cfg)
        self.norm2 = nn.LayerNorm(cfg.width)
        self.ffn = MLP(cfg)

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        return x + self.ffn(self.norm2(x))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.trunk = nn.ModuleDict(dict(
            tok_emb=nn.Embedding(cfg.vocab, cfg.width),
            pos_emb=nn.Embedding(cfg.ctx_len, cfg.width),
            emb_drop=nn.Dropout(cfg.dropout),
            layers=nn.ModuleList([Block(cfg) for _ in range(cfg.depth)]),
            norm_f=nn.LayerNorm(cfg.width),
        ))
        self.head = nn.Linear(cfg.width, cfg.vocab, bias=False)
        self.trunk.tok_emb.weight = self.head.weight

    def forward(self, tokens, labels=None):
        b, t = tokens.size()
        pos = torch.arange(0, t, dtype=torch.long, device=tokens.device).unsqueeze(0)
        x = self.trunk.emb_drop(self.trunk.tok_emb(tokens) + self.trunk.pos_emb(pos))
        for blk in self.trunk['layers']:
            x = blk(x)
        x = self.trunk.norm_f(x)
        lm_logits = self.head(x)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(lm_logits.view(-1, lm_logits.size(-1)), labels.view(-1), ignore_index=-1)
        return lm_logits, loss


@torch.no_grad()
def estimate_loss(model, fetch_batch, n_batches, ctx):
    result = {}
    model.eval()
    for part in ['train', 'val']:
        vals = torch.zeros(n_batches)
        for k in range(n_batches):
            xb, yb = fetch_batch(part)
            with ctx:
                _, loss = model(xb, yb)
            vals[k] = float(loss)
        result[part] = vals.mean().item()
    model.train()
    return result
