"""A small from-scratch LLM pretraining script: PretrainDataset wraps each text in BOS/EOS, pads it
with token 0 to max_length and returns (X, Y, loss_mask) with loss_mask 0 on the padding; the
Transformer's forward(tokens, targets) stores self.last_loss = F.cross_entropy(..., ignore_index=-1)
and train_epoch() sets the lr from a warmup-plus-cosine get_lr(), then applies the mask with
sum(loss * loss_mask) / loss_mask.sum(), with gradient accumulation and clipping. The cross entropy
already returns one mean over every position, padding included (pad id 0 is a real target since the
ignore index is -1), so the loss_mask step rescales a scalar and masks nothing: most of each batch's
loss and gradient come from predicting the padding.

Thread: https://github.com/jingyaogong/minimind/issues/51
"""
import math
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

PAD, BOS, EOS, VOCAB = 0, 1, 2, 64


def make_texts(n, seed):
    """Token ids of short 'documents' from a sparse Markov chain over ids 3..VOCAB-1."""
    g = torch.Generator().manual_seed(seed)
    trans = torch.softmax(3.0 * torch.randn(VOCAB, VOCAB, generator=torch.Generator().manual_seed(11)), -1)
    trans[:, :3] = 0
    texts = []
    for _ in range(n):
        length = int(torch.randint(6, 30, (1,), generator=g))
        tok = [int(torch.randint(3, VOCAB, (1,), generator=g))]
        for _ in range(length - 1):
            tok.append(int(torch.multinomial(trans[tok[-1]], 1, generator=g)))
        texts.append(tok)
    return texts


class PretrainDataset(Dataset):
    def __init__(self, texts, max_length=64):
        self.texts, self.max_length, self.padding = texts, max_length, PAD

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, index):
        input_id = ([BOS] + self.texts[index] + [EOS])[: self.max_length]
        text_len = len(input_id)
        padding_len = self.max_length - text_len
        input_id = input_id + [self.padding] * padding_len
        loss_mask = [1] * text_len + [0] * padding_len
        ids = torch.tensor(input_id)
        return ids[:-1], ids[1:], torch.tensor(loss_mask[1:])


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.attention_norm, self.ffn_norm = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.feed_forward = nn.Sequential(nn.Linear(dim, 4 * dim), nn.SiLU(), nn.Linear(4 * dim, dim))

    def forward(self, h, mask):
        x = self.attention_norm(h)
        h = h + self.attention(x, x, x, attn_mask=mask, need_weights=False)[0]
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.pos = nn.Embedding(cfg.max_seq_len, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg.dim, cfg.n_heads) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(cfg.dim)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        self.tok_embeddings.weight = self.output.weight
        self.last_loss = None

    def forward(self, tokens, targets=None):
        t = tokens.size(1)
        h = self.tok_embeddings(tokens) + self.pos(torch.arange(t))
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        for layer in self.layers:
            h = layer(h, mask)
        h = self.norm(h)
        logits = self.output(h)
        if targets is not None:
            self.last_loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return SimpleNamespace(logits=logits, last_loss=self.last_loss)


def get_lr(it, all_iters, args):
    min_lr = args.learning_rate / 10
    if it < args.warmup_iters:
        return args.learning_rate * it / args.warmup_iters
    if it > all_iters:
        return min_lr
    decay_ratio = (it - args.warmup_iters) / (all_iters - args.warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * decay_ratio)) * (args.learning_rate - min_lr)


def train_epoch(epoch, model, optimizer, train_loader, args):
    iter_per_epoch = len(train_loader)
    for step, (X, Y, loss_mask) in enumerate(train_loader):
        lr = get_lr(epoch * iter_per_epoch + step, args.epochs * iter_per_epoch, args)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        out = model(X, Y)
        loss = out.last_loss / args.accumulation_steps
        loss_mask = loss_mask.view(-1)
        loss = torch.sum(loss * loss_mask) / loss_mask.sum()
        loss.backward()
        if (step + 1) % args.accumulation_steps == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        if step % args.log_interval == 0:
            print(f"Epoch:[{epoch}/{args.epochs}]({step}/{iter_per_epoch}) "
                  f"loss:{loss.item() * args.accumulation_steps:.3f} lr:{lr:.7f}")


def main():
    torch.manual_seed(0)
    args = SimpleNamespace(epochs=2, batch_size=24, learning_rate=2e-3, warmup_iters=0, accumulation_steps=2,
                           grad_clip=1.0, log_interval=20)
    cfg = SimpleNamespace(vocab_size=VOCAB, dim=64, n_layers=2, n_heads=4, max_seq_len=64)
    train_ds = PretrainDataset(make_texts(1680, seed=0), max_length=65)
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=False)
    model = Transformer(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    for epoch in range(args.epochs):
        train_epoch(epoch, model, optimizer, train_loader, args)


if __name__ == "__main__":
    main()
