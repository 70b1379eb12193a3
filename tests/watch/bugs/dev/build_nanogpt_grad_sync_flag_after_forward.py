"""A nanoGPT-style GPT-2 pretraining script: one top-level loop over max_steps with a cosine
get_lr(step), a DataLoaderLite whose next_batch() hands each DDP rank its own slice of a token
stream, and gradient accumulation over grad_accum_steps micro-steps under DDP (x, y =
next_batch(); logits, loss = model(x, y); loss / grad_accum_steps; backward), then clip_grad_norm_,
the lr set by hand and optimizer.step(). To all-reduce only once per step the loop sets
model.require_backward_grad_sync = (micro_step == grad_accum_steps - 1), but it sets it after the
forward and right before loss.backward(). DDP decides at forward time whether the coming backward
all-reduces, so the last micro-step's backward (forward run with the flag still False) does not
sync, and the first micro-step of the next step (forward run with the flag left True) does: each
rank steps with the average of micro-batch 0 plus its own unsynchronised micro-batches 1..3. The
effective batch shrinks, the replicas drift apart, and the loss is clearly worse than the same run
without accumulation. Four ranks are simulated in one process by a lockstep DDP stand-in whose
gradient hooks are armed by the forward, as DDP's reducer is.

Thread: https://github.com/karpathy/build-nanogpt/pull/30
"""
import copy
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


# ----------------------------------------------------------------------------- model
@dataclass
class GPTConfig:
    block_size: int = 32
    vocab_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.n_head, self.n_embd = config.n_head, config.n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(config.n_embd), nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.mlp = nn.Sequential(nn.Linear(config.n_embd, 4 * config.n_embd), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * config.n_embd, config.n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx, targets=None):
        B, T = idx.size()
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


# ----------------------------------------------------------------------------- DDP stand-in
class _RankMean(torch.autograd.Function):
    """Logged loss = mean over ranks; in backward every rank receives its own full gradient."""

    @staticmethod
    def forward(ctx, *losses):
        return torch.stack(losses).mean()

    @staticmethod
    def backward(ctx, grad):
        return tuple(grad for _ in range(len(ctx.needs_input_grad)))


class LockstepDDP(nn.Module):
    """World of `world_size` replicas stepped together in one process. Like DDP's reducer, the
    forward decides (from require_backward_grad_sync) whether the coming backward all-reduces;
    per-parameter hooks count arriving grads and average every .grad across ranks once all of
    them have arrived."""

    def __init__(self, module, world_size):
        super().__init__()
        self.replicas = nn.ModuleList([module] + [copy.deepcopy(module) for _ in range(world_size - 1)])
        self.require_backward_grad_sync = True
        self._expect_hooks = False
        self._arrived = 0
        self._params = [list(r.parameters()) for r in self.replicas]
        for plist in self._params:
            for p in plist:
                p.register_post_accumulate_grad_hook(self._grad_ready)

    def _grad_ready(self, _param):
        if not self._expect_hooks:
            return
        self._arrived += 1
        if self._arrived == sum(len(pl) for pl in self._params):
            for group in zip(*self._params):
                avg = torch.stack([p.grad for p in group]).mean(0)
                for p in group:
                    p.grad.copy_(avg)
            self._expect_hooks = False

    def forward(self, idx, targets):
        # prepare_for_backward happens here, with the flag as it is *now*
        self._expect_hooks = torch.is_grad_enabled() and self.require_backward_grad_sync
        self._arrived = 0
        outs = [rep(idx[r], targets[r]) for r, rep in enumerate(self.replicas)]
        return torch.stack([o[0] for o in outs]), _RankMean.apply(*[o[1] for o in outs])


def all_reduce_avg(t):  # dist.all_reduce(..., op=AVG): the stand-in's losses are already averaged
    return t


# ----------------------------------------------------------------------------- data
def make_token_stream(n_tokens, vocab, seed=0):
    """A fixed random bigram process: a sharp next-token table, sampled into one long stream."""
    g = torch.Generator().manual_seed(seed)
    table = torch.softmax(4.0 * torch.randn(vocab, vocab, generator=g), dim=-1)
    cdf = table.cumsum(-1).numpy()
    draws = torch.rand(n_tokens, generator=g).numpy()
    toks = np.zeros(n_tokens, dtype=np.int64)
    for i in range(1, n_tokens):
        toks[i] = min(int(np.searchsorted(cdf[toks[i - 1]], draws[i])), vocab - 1)
    return torch.from_numpy(toks)


class DataLoaderLite:
    def __init__(self, tokens, B, T, process_rank, num_processes):
        self.tokens, self.B, self.T = tokens, B, T
        self.process_rank, self.num_processes = process_rank, num_processes
        self.reset()

    def reset(self):
        self.current_position = self.B * self.T * self.process_rank

    def next_batch(self):
        B, T = self.B, self.T
        buf = self.tokens[self.current_position: self.current_position + B * T + 1]
        x, y = buf[:-1].view(B, T), buf[1:].view(B, T)
        self.current_position += B * T * self.num_processes
        if self.current_position + (B * T * self.num_processes + 1) > len(self.tokens):
            self.current_position = B * T * self.process_rank
        return x, y


class RankLoaders:
    """The per-rank DataLoaderLite objects, read in lockstep (each rank's batch on a leading dim)."""

    def __init__(self, loaders):
        self.loaders = loaders

    def reset(self):
        for ld in self.loaders:
            ld.reset()

    def next_batch(self):
        xs, ys = zip(*(ld.next_batch() for ld in self.loaders))
        return torch.stack(xs), torch.stack(ys)


# ----------------------------------------------------------------------------- training
def main():
    torch.manual_seed(1337)
    ddp, ddp_world_size = True, 4
    total_batch_size = 4096  # tokens per optimizer step
    B, T = 8, 32
    grad_accum_steps = total_batch_size // (B * T * ddp_world_size)
    print(f"total desired batch size: {total_batch_size} => grad_accum_steps: {grad_accum_steps}")

    vocab = 64
    stream = make_token_stream(120_000, vocab, seed=0)
    train_tokens, val_tokens = stream[:100_000], stream[100_000:]
    train_loader = RankLoaders([DataLoaderLite(train_tokens, B, T, r, ddp_world_size) for r in range(ddp_world_size)])
    val_loader = RankLoaders([DataLoaderLite(val_tokens, B, T, r, ddp_world_size) for r in range(ddp_world_size)])

    model = LockstepDDP(GPT(GPTConfig(block_size=T, vocab_size=vocab)), ddp_world_size)
    raw_model = model.replicas[0]

    max_lr, min_lr, warmup_steps, max_steps = 3e-3, 3e-4, 10, 60

    def get_lr(it):
        if it < warmup_steps:
            return max_lr * (it + 1) / warmup_steps
        decay_ratio = (it - warmup_steps) / (max_steps - warmup_steps)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * decay_ratio)) * (max_lr - min_lr)

    optimizer = torch.optim.AdamW(model.parameters(), lr=max_lr, betas=(0.9, 0.95), weight_decay=0.1)

    for step in range(max_steps):
        last_step = step == max_steps - 1
        if step % 20 == 0 or last_step:
            model.eval()
            val_loader.reset()
            with torch.no_grad():
                val_loss_accum = 0.0
                for _ in range(5):
                    x, y = val_loader.next_batch()
                    _, loss = model(x, y)
                    val_loss_accum += loss.detach() / 5
            val_loss_accum = all_reduce_avg(val_loss_accum)
            drift = sum((a - b).norm() ** 2 for a, b in zip(*(r.parameters() for r in model.replicas[:2]))) ** 0.5
            print(f"{step} val {val_loss_accum.item():.4f}  (rank0-rank1 weight distance {drift.item():.4f})")

        model.train()
        optimizer.zero_grad()
        loss_accum = 0.0
        for micro_step in range(grad_accum_steps):
            x, y = train_loader.next_batch()
            logits, loss = model(x, y)
            # the gradients add up over micro-steps, so scale the loss to get their MEAN
            loss = loss / grad_accum_steps
            loss_accum += loss.detach()
            if ddp:
                model.require_backward_grad_sync = (micro_step == grad_accum_steps - 1)
            loss.backward()
        loss_accum = all_reduce_avg(loss_accum)
        for rank_model in model.replicas:  # every rank clips its own gradients
            norm = torch.nn.utils.clip_grad_norm_(rank_model.parameters(), 1.0)
        lr = get_lr(step)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step:4d} | loss: {loss_accum.item():.6f} | lr {lr:.4e} | norm: {norm:.4f}")


if __name__ == "__main__":
    main()
