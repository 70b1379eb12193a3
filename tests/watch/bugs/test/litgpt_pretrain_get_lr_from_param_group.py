"""A litgpt-style pretraining fit(): the optimizer is instantiated from a config dict
({"class_path": "torch.optim.AdamW", "init_args": {"lr": ...}}), a state dict carries model,
optimizer, iter_num and step_count, a CycleIterator loops over a DataLoader of token windows of
max_seq_length + 1 (input_ids / targets sliced from them), and every micro-iteration sets the lr from
a warmup-plus-cosine get_lr(learning_rate, it, warmup_iters, max_iters, min_lr) before gradient
accumulation, clipping and the optimizer step. The base learning rate passed to get_lr is read back
from optimizer.param_groups[0]["lr"], i.e. the value the previous iteration wrote there, instead of
the configured one: the warmup multiplies 0 at iteration 0, so the lr stays 0 through warmup and then
only creeps up towards min_lr, and the model barely trains.

Thread: https://github.com/Lightning-AI/litgpt/pull/1435
"""
import importlib
import math
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

VOCAB, SEQ = 64, 32


def instantiate_torch_optimizer(optimizer, params, **kwargs):
    module_name, cls_name = optimizer["class_path"].rsplit(".", 1)
    cls = getattr(importlib.import_module(module_name), cls_name)
    return cls(params, **{**optimizer["init_args"], **kwargs})


class CycleIterator:
    def __init__(self, iterable):
        self.iterable, self.epoch, self._it = iterable, 0, None

    def __iter__(self):
        return self

    def __next__(self):
        if self._it is None:
            self._it = iter(self.iterable)
        try:
            return next(self._it)
        except StopIteration:
            self._it = iter(self.iterable)
            self.epoch += 1
            return next(self._it)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.norm_1, self.norm_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.norm_1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.norm_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.max_seq_length = config.block_size
        self.wte, self.wpe = nn.Embedding(config.vocab_size, config.n_embd), nn.Embedding(config.block_size, config.n_embd)
        self.h = nn.ModuleList(Block(config.n_embd, config.n_head) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx):
        t = idx.size(1)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for block in self.h:
            x = block(x, mask)
        return self.lm_head(self.ln_f(x))


def token_windows(n, seed):
    g = torch.Generator().manual_seed(seed)
    succ = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(3))
    rows = torch.empty(n, SEQ + 1, dtype=torch.long)
    rows[:, 0] = torch.randint(VOCAB, (n,), generator=g)
    for i in range(1, SEQ + 1):
        noise = torch.rand(n, generator=g) < 0.1
        rows[:, i] = torch.where(noise, torch.randint(VOCAB, (n,), generator=g), succ[rows[:, i - 1]])
    return rows


def get_lr(learning_rate, it, warmup_iters, max_iters, min_lr):
    if it < warmup_iters:
        return learning_rate * it / warmup_iters
    if it > max_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (max_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


@torch.no_grad()
def validate(model, val_dataloader, max_iters):
    model.eval()
    losses = []
    for k, val_data in enumerate(val_dataloader):
        if k >= max_iters:
            break
        input_ids, targets = val_data[:, 0:model.max_seq_length], val_data[:, 1:model.max_seq_length + 1]
        logits = model(input_ids)
        losses.append(F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1)))
    model.train()
    return torch.stack(losses).mean().item()


def fit(state, train_dataloader, val_dataloader, train, max_iters):
    model, optimizer = state["model"], state["optimizer"]
    train_iterator = CycleIterator(train_dataloader)
    warmup_iters = train.lr_warmup_steps * train.gradient_accumulation_iters
    for train_data in train_iterator:
        if state["iter_num"] >= max_iters:
            break
        lr = get_lr(optimizer.param_groups[0]["lr"], state["iter_num"], warmup_iters, max_iters, train.min_lr)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        state["iter_num"] += 1
        input_ids = train_data[:, 0:model.max_seq_length].contiguous().long()
        targets = train_data[:, 1:(model.max_seq_length + 1)].contiguous().long()
        is_accumulating = state["iter_num"] % train.gradient_accumulation_iters != 0
        logits = model(input_ids)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        (loss / train.gradient_accumulation_iters).backward()
        if not is_accumulating:
            nn.utils.clip_grad_norm_(model.parameters(), train.max_norm)
            optimizer.step()
            optimizer.zero_grad()
            state["step_count"] += 1
        if state["iter_num"] % train.log_interval == 0:
            print(f"iter {state['iter_num']} step {state['step_count']} | loss train: {loss.item():.3f} "
                  f"| lr {lr:.2e}")
        if not is_accumulating and state["step_count"] % train.eval_interval == 0:
            print(f"  val loss {validate(model, val_dataloader, max_iters=4):.3f}")


def main():
    torch.manual_seed(0)
    config = SimpleNamespace(vocab_size=VOCAB, block_size=SEQ, n_embd=64, n_layer=2, n_head=4)
    train = SimpleNamespace(micro_batch_size=16, gradient_accumulation_iters=2, lr_warmup_steps=8, min_lr=3e-4,
                            max_norm=1.0, log_interval=20, eval_interval=20, max_steps=80)
    optimizer_cfg = {"class_path": "torch.optim.AdamW",
                     "init_args": {"lr": 3e-3, "weight_decay": 0.1, "betas": (0.9, 0.95)}}
    model = GPT(config)
    optimizer = instantiate_torch_optimizer(optimizer_cfg, model.parameters())
    state = {"model": model, "optimizer": optimizer, "iter_num": 0, "step_count": 0}
    train_dataloader = DataLoader(token_windows(1600, seed=0), batch_size=train.micro_batch_size, shuffle=True,
                                  generator=torch.Generator().manual_seed(0))
    val_dataloader = DataLoader(token_windows(128, seed=1), batch_size=train.micro_batch_size)
    print(f"initial val loss {validate(model, val_dataloader, max_iters=2):.3f}")
    fit(state, train_dataloader, val_dataloader, train, max_iters=train.max_steps * train.gradient_accumulation_iters)


if __name__ == "__main__":
    main()
