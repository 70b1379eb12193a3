"""A nanoGPT-style character language model: model.py-like GPTConfig / CausalSelfAttention / MLP /
Block / GPT modules (the attention takes the "flash" path through
F.scaled_dot_product_attention with is_causal=True), and a train.py-like script with
get_batch(split) sampling random windows from a train or val token stream, an estimate_loss()
helper that puts the model in eval() mode under torch.no_grad(), averages eval_iters batches per
split and puts it back in train(), and an AdamW loop with warmup plus cosine decay that logs
train/val loss every eval_interval steps. Dropout is set to 0.2, as for fine-tuning. The bug:
the flash path passes dropout_p=self.dropout to scaled_dot_product_attention unconditionally.
That is a functional call, so model.eval() cannot switch it off: every "evaluation" forward still
drops 20% of the attention weights at random. Training itself is unaffected, but each logged val
(and train) loss is measured on a randomly damaged model, so it comes out too high and jitters
from one estimate to the next, and checkpoint selection on it is misled.

Thread: https://github.com/karpathy/nanoGPT/pull/240
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class GPTConfig:
    block_size: int = 48
    vocab_size: int = 32
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.2
    bias: bool = False


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        # efficient attention kernel
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=self.dropout, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

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
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


# ----------------------------------------------------------------------------- train.py
batch_size = 16
block_size = 48
max_iters = 500
eval_interval = 100
eval_iters = 10
learning_rate = 3e-3
min_lr = 3e-4
warmup_iters = 50


def make_corpus(n_chars, gen):
    """Synthetic 'text' over 32 symbols: words drawn from a small lexicon, separated by spaces,
    with a word-to-word transition table so that there is structure to learn."""
    lexicon = [torch.randint(1, 32, (int(torch.randint(2, 7, (1,), generator=gen)),), generator=gen)
               for _ in range(60)]
    trans = torch.softmax(torch.randn(60, 60, generator=gen) * 2.5, dim=1)
    out, w = [], 0
    while len(out) < n_chars:
        out.extend(lexicon[w].tolist())
        out.append(0)
        w = int(torch.multinomial(trans[w], 1, generator=gen))
    return torch.tensor(out[:n_chars], dtype=torch.long)


def main():
    torch.manual_seed(1337)
    gen = torch.Generator().manual_seed(1337)
    data = make_corpus(60000, gen)
    n = int(0.9 * len(data))
    train_data, val_data = data[:n], data[n:]

    def get_batch(split):
        d = train_data if split == "train" else val_data
        ix = torch.randint(len(d) - block_size, (batch_size,), generator=gen)
        x = torch.stack([d[i:i + block_size] for i in ix])
        y = torch.stack([d[i + 1:i + 1 + block_size] for i in ix])
        return x, y

    model = GPT(GPTConfig(block_size=block_size))
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.99), weight_decay=0.1)

    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ["train", "val"]:
            losses = torch.zeros(eval_iters)
            for k in range(eval_iters):
                X, Y = get_batch(split)
                _, loss = model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean()
        model.train()
        return out

    def get_lr(it):
        if it < warmup_iters:
            return learning_rate * it / warmup_iters
        ratio = (it - warmup_iters) / (max_iters - warmup_iters)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)

    best_val_loss = 1e9
    X, Y = get_batch("train")
    for iter_num in range(max_iters + 1):
        lr = get_lr(iter_num)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        if iter_num % eval_interval == 0:
            losses = estimate_loss()
            print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
            if losses["val"] < best_val_loss:
                best_val_loss = losses["val"]
        if iter_num == max_iters:
            break
        _, loss = model(X, Y)
        X, Y = get_batch("train")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    print(f"best val loss {best_val_loss:.4f}")


if __name__ == "__main__":
    main()
