"""A nanoGPT-style training script for a GPT-2 model over tokenized patient timelines (EHR
events), with dropout 0.3, a warmup-plus-cosine get_lr(), gradient accumulation, clipping and an
estimate_loss(model, ctx, loaders, eval_iters) helper called every eval_interval iterations that
picks the best checkpoint by validation loss. estimate_loss is decorated with inference_mode() but
the model is never switched to eval() mode anywhere, so every reported train and
validation loss, and the best-model choice, is computed with dropout active.

Thread: https://github.com/ipolharvard/ethos-ares/issues/20
"""
import math
from contextlib import nullcontext
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(cfg.n_embd), nn.LayerNorm(cfg.n_embd)
        self.attn = nn.MultiheadAttention(cfg.n_embd, cfg.n_head, dropout=cfg.dropout, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(),
                                 nn.Linear(4 * cfg.n_embd, cfg.n_embd), nn.Dropout(cfg.dropout))
        self.resid_drop = nn.Dropout(cfg.dropout)

    def forward(self, x, mask):
        h = self.ln_1(x)
        x = x + self.resid_drop(self.attn(h, h, h, attn_mask=mask, need_weights=False)[0])
        return x + self.mlp(self.ln_2(x))


class TimelineGPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, input_ids, labels=None):
        t = input_ids.size(1)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        x = self.drop(self.wte(input_ids) + self.wpe(torch.arange(t)))
        for block in self.h:
            x = block(x, mask)
        logits = self.lm_head(self.ln_f(x))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)
        return SimpleNamespace(loss=loss, logits=logits)


class TimelineLoader:
    """Endless batches of (static context + event timeline) windows; targets are pre-shifted."""

    def __init__(self, n_patients, cfg, seed):
        g = torch.Generator().manual_seed(seed)
        trans = torch.softmax(2.5 * torch.randn(cfg.vocab_size, cfg.vocab_size, generator=torch.Generator().manual_seed(7)), -1)
        seqs = torch.zeros(n_patients, cfg.timeline_size + 1, dtype=torch.long)
        seqs[:, 0] = torch.randint(cfg.context_size, cfg.vocab_size, (n_patients,), generator=g)
        for i in range(1, cfg.timeline_size + 1):
            seqs[:, i] = torch.multinomial(trans[seqs[:, i - 1]], 1, generator=g).squeeze(1)
        ctx = torch.randint(0, cfg.context_size, (n_patients, cfg.context_size), generator=g)
        self.x = torch.cat([ctx, seqs[:, :-1]], 1)
        self.y = torch.cat([torch.full_like(ctx, -100), seqs[:, 1:]], 1)
        self.g, self.bs = g, cfg.batch_size

    def __iter__(self):
        return self

    def __next__(self):
        idx = torch.randint(0, len(self.x), (self.bs,), generator=self.g)
        return self.x[idx], self.y[idx]


@torch.inference_mode()
def estimate_loss(model, ctx, loaders, eval_iters):
    out = {}
    for split, dataloader in loaders:
        losses = torch.empty(eval_iters)
        for i, (X, Y) in zip(range(eval_iters), dataloader):
            with ctx:
                losses[i] = model(input_ids=X, labels=Y).loss.item()
        out[f"loss/{split}"] = losses.mean().item()
    return out


def get_lr(it, cfg):
    if it < cfg.warmup_iters:
        return cfg.lr * it / cfg.warmup_iters
    ratio = min(1.0, (it - cfg.warmup_iters) / (cfg.lr_decay_iters - cfg.warmup_iters))
    return cfg.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (cfg.lr - cfg.min_lr)


def main():
    cfg = SimpleNamespace(vocab_size=48, context_size=4, timeline_size=28, n_positions=32, n_layer=2, n_head=4,
                          n_embd=64, dropout=0.3, batch_size=16, gradient_accumulation_steps=2, lr=3e-3,
                          min_lr=1e-4, warmup_iters=10, lr_decay_iters=90, max_iters=90, eval_interval=15,
                          eval_iters=6, grad_clip=1.0, weight_decay=0.1)
    torch.manual_seed(0)
    train_dataloader, val_dataloader = TimelineLoader(2000, cfg, seed=0), TimelineLoader(400, cfg, seed=1)
    model = TimelineGPT(cfg)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
    ctx = nullcontext()
    iter_num, best_val_loss = 0, 1e9
    X, Y = next(train_dataloader)
    while True:
        lr = get_lr(iter_num, cfg)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        if iter_num % cfg.eval_interval == 0:
            losses = estimate_loss(model, ctx, [("train", train_dataloader), ("val", val_dataloader)], cfg.eval_iters)
            print(f"step {iter_num}: train loss {losses['loss/train']:.4f}, val loss {losses['loss/val']:.4f}")
            if iter_num > 0 and losses["loss/val"] < best_val_loss:
                best_val_loss = losses["loss/val"]
                print(f"  new best model (val loss {best_val_loss:.4f})")
        for micro_step in range(cfg.gradient_accumulation_steps):
            with ctx:
                loss = model(input_ids=X, labels=Y).loss / cfg.gradient_accumulation_steps
            X, Y = next(train_dataloader)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        iter_num += 1
        if iter_num > cfg.max_iters:
            break


if __name__ == "__main__":
    main()
