"""An open_lm-style language-model trainer with Mixture-of-Experts feed-forward layers: every
moe_freq-th block replaces its MLP with a top-k routed MoE layer that saves (tokens_per_expert,
expert_scores) into a module-level list, megablocks-style; after the forward pass
train_one_epoch(model, data, loss, epoch, step, optimizer, scheduler, moe_args, args) computes
batched_load_balancing_loss(moe_args), clears the list, adds it to the cross-entropy and steps AdamW
with a cosine schedule. A loss meter averages the logged training loss; evaluate() reports the
validation cross-entropy.

The meter is updated with the total loss tensor, cross-entropy plus the load-balancing term, so the
number logged as the training loss is higher than the model's language-modelling loss by the
auxiliary term and is not comparable with a dense run's loss or with the validation loss. Nothing
errors; the fix subtracts the load-balancing loss before updating the meter and logs it separately.

Thread: https://github.com/mlfoundations/open_lm/pull/255
"""
import math
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

_LOAD_BALANCING_LOSS = []


def save_load_balancing_loss(tokens_per_expert, expert_scores):
    _LOAD_BALANCING_LOSS.append((tokens_per_expert, expert_scores))


def clear_load_balancing_loss():
    _LOAD_BALANCING_LOSS.clear()


def batched_load_balancing_loss(moe_args):
    tokens_per_expert, expert_scores = zip(*_LOAD_BALANCING_LOSS)
    tokens = expert_scores[0].shape[0]
    scale = moe_args.moe_loss_weight * moe_args.moe_num_experts / (
        moe_args.num_layers * tokens * tokens * moe_args.moe_top_k)
    total = sum((t.float() * s.sum(0)).sum() for t, s in zip(tokens_per_expert, expert_scores))
    return scale * total


class MoE(nn.Module):
    def __init__(self, dim, hidden, num_experts, top_k):
        super().__init__()
        self.top_k = top_k
        self.router = nn.Linear(dim, num_experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(num_experts, dim, hidden) / math.sqrt(dim))
        self.w2 = nn.Parameter(torch.randn(num_experts, hidden, dim) / math.sqrt(hidden))

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        scores = self.router(x).softmax(dim=-1)
        weights, experts = scores.topk(self.top_k, dim=-1)
        out = torch.zeros_like(x)
        for e in range(self.w1.shape[0]):
            tok, slot = (experts == e).nonzero(as_tuple=True)
            if tok.numel():
                h = F.gelu(x[tok] @ self.w1[e]) @ self.w2[e]
                out.index_add_(0, tok, weights[tok, slot, None] * h)
        save_load_balancing_loss(torch.bincount(experts.flatten(), minlength=self.w1.shape[0]), scores)
        return out.view(shape)


class Block(nn.Module):
    def __init__(self, dim, heads, ffn):
        super().__init__()
        self.attention_norm = nn.LayerNorm(dim)
        self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ffn_norm = nn.LayerNorm(dim)
        self.feed_forward = ffn

    def forward(self, x, mask):
        h = self.attention_norm(x)
        x = x + self.attention(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.feed_forward(self.ffn_norm(x))


class Transformer(nn.Module):
    def __init__(self, vocab, dim, n_layers, heads, moe_freq, num_experts, top_k, seq_len):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(0.02 * torch.randn(1, seq_len, dim))
        self.layers = nn.ModuleList()
        for i in range(n_layers):
            if moe_freq > 0 and i % moe_freq == moe_freq - 1:
                ffn = MoE(dim, 2 * dim, num_experts, top_k)
            else:
                ffn = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
            self.layers.append(Block(dim, heads, ffn))
        self.norm = nn.LayerNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        self.register_buffer("mask", torch.triu(torch.full((seq_len, seq_len), float("-inf")), 1))

    def forward(self, tokens):
        x = self.tok_embeddings(tokens) + self.pos[:, :tokens.shape[1]]
        for layer in self.layers:
            x = layer(x, self.mask)
        return self.output(self.norm(x))


class AverageMeter:
    def __init__(self):
        self.sum, self.count = 0.0, 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n

    @property
    def avg(self):
        return self.sum / max(self.count, 1)


def markov_tokens(n, seq_len, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    trans = torch.softmax(3.0 * torch.randn(vocab, vocab, generator=torch.Generator().manual_seed(7)), -1)
    seqs = torch.empty(n, seq_len + 1, dtype=torch.long)
    seqs[:, 0] = torch.randint(0, vocab, (n,), generator=g)
    for t in range(seq_len):
        seqs[:, t + 1] = torch.multinomial(trans[seqs[:, t]], 1, generator=g).squeeze(1)
    return seqs


def train_one_epoch(model, data, loss, epoch, step, optimizer, scheduler, moe_args, args):
    model.train()
    losses_m = AverageMeter()
    perm = torch.randperm(len(data), generator=torch.Generator().manual_seed(epoch))
    for i in range(len(data) // args.batch_size):
        batch = data[perm[i * args.batch_size:(i + 1) * args.batch_size]]
        inputs, targets = batch[:, :-1], batch[:, 1:]
        out = model(inputs)
        total_loss = loss(out.reshape(-1, out.shape[-1]), targets.reshape(-1))
        if args.moe_freq > 0:
            total_load_balancing_loss = batched_load_balancing_loss(moe_args)
            clear_load_balancing_loss()
            total_loss = total_loss + total_load_balancing_loss
        optimizer.zero_grad()
        total_loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        step += 1
        global_loss_tensor = total_loss.detach()
        losses_m.update(global_loss_tensor.item(), args.batch_size)
        if step % args.log_every_n_steps == 0:
            print(f"Train Epoch: {epoch} step {step} Loss: {losses_m.avg:.4f} "
                  f"LR: {optimizer.param_groups[0]['lr']:.2e}")
            losses_m = AverageMeter()
    return step


@torch.no_grad()
def evaluate(model, data):
    model.eval()
    out = model(data[:, :-1])
    clear_load_balancing_loss()
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), data[:, 1:].reshape(-1)).item()


def main():
    torch.manual_seed(0)
    args = SimpleNamespace(vocab=48, seq_len=32, dim=64, n_layers=4, heads=4, moe_freq=2, batch_size=32,
                           epochs=3, lr=3e-3, log_every_n_steps=10)
    moe_args = SimpleNamespace(moe_num_experts=4, moe_top_k=2, moe_loss_weight=0.1,
                               num_layers=args.n_layers // 2)
    model = Transformer(args.vocab, args.dim, args.n_layers, args.heads, args.moe_freq,
                        moe_args.moe_num_experts, moe_args.moe_top_k, args.seq_len)
    train_data = markov_tokens(800, args.seq_len, args.vocab, 0)
    val_data = markov_tokens(200, args.seq_len, args.vocab, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, betas=(0.9, 0.95))
    total_steps = args.epochs * (len(train_data) // args.batch_size)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / 10) * 0.5 * (1 + math.cos(math.pi * s / total_steps)))
    step = 0
    for epoch in range(args.epochs):
        step = train_one_epoch(model, train_data, nn.CrossEntropyLoss(), epoch, step, optimizer,
                               scheduler, moe_args, args)
        print(f"Eval epoch {epoch}: val loss {evaluate(model, val_data):.4f}")


if __name__ == "__main__":
    main()
