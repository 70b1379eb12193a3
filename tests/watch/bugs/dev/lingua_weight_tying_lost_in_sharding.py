"""A Meta-Lingua-style LM trainer: LMTransformer(args) with args.weight_tying ties the output
projection in __init__ (self.output.weight = self.tok_embeddings.weight); train() builds the model,
wraps it with parallelize_model() (FSDP-style sharding applied to each block and to the root), then
calls model.init_weights(), whose reset_parameters() skips the output layer when weight_tying is on
because it is supposed to be the embedding. The sharding wrapper re-registers every module's
parameters as its own new tensors, so the tie is silently gone: the output layer keeps its own
copy, trains apart from the embedding, and the training loss falls normally. The consolidated
checkpoint therefore holds two different matrices; the eval model, built unsharded, is tied
again, load_state_dict writes both keys into the one shared tensor, the output matrix wins, and
the evaluated loss is far above the training loss.

Thread: https://github.com/facebookresearch/lingua/issues/74
"""
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class LMTransformerArgs:
    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    vocab_size: int = 96
    max_seqlen: int = 32
    weight_tying: bool = False
    seed: int = 42


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def reset_parameters(self):
        nn.init.ones_(self.weight)


class TransformerBlock(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.n_heads = args.n_heads
        self.attention_norm, self.ffn_norm = RMSNorm(args.dim), RMSNorm(args.dim)
        self.wqkv = nn.Linear(args.dim, 3 * args.dim, bias=False)
        self.wo = nn.Linear(args.dim, args.dim, bias=False)
        self.w1 = nn.Linear(args.dim, 4 * args.dim, bias=False)
        self.w2 = nn.Linear(4 * args.dim, args.dim, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.wqkv(self.attention_norm(x)).view(b, t, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        h = x + self.wo(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d))
        return h + self.w2(F.silu(self.w1(self.ffn_norm(h))))

    def init_weights(self, init_std):
        for lin in (self.wqkv, self.wo, self.w1, self.w2):
            nn.init.trunc_normal_(lin.weight, std=init_std, a=-3 * init_std, b=3 * init_std)
        self.attention_norm.reset_parameters()
        self.ffn_norm.reset_parameters()


class LMTransformer(nn.Module):
    def __init__(self, args: LMTransformerArgs):
        super().__init__()
        self.dim, self.weight_tying = args.dim, args.weight_tying
        self.pos_embeddings = nn.Embedding(args.max_seqlen, args.dim)
        self.layers = nn.ModuleList([TransformerBlock(args) for _ in range(args.n_layers)])
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.norm = RMSNorm(args.dim)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)
        if args.weight_tying:
            self.output.weight = self.tok_embeddings.weight

    def forward(self, token_values, target=None):
        h = self.tok_embeddings(token_values) + self.pos_embeddings(torch.arange(token_values.shape[1]))
        for layer in self.layers:
            h = layer(h)
        logits = self.output(self.norm(h))
        if target is not None:
            return F.cross_entropy(logits.flatten(0, 1), target.flatten())
        return logits

    def reset_parameters(self, init_std=None):
        init_std = init_std or (self.dim ** (-0.5))
        self.norm.reset_parameters()
        nn.init.trunc_normal_(self.tok_embeddings.weight, std=init_std, a=-3 * init_std, b=3 * init_std)
        nn.init.normal_(self.pos_embeddings.weight, std=0.02)
        if not self.weight_tying:
            nn.init.trunc_normal_(self.output.weight, std=init_std, a=-3 * init_std, b=3 * init_std)

    def init_weights(self):
        self.reset_parameters()
        for depth, layer in enumerate(self.layers):
            layer.init_weights((2 * (depth + 1)) ** (-0.5) * self.dim ** (-0.5))


# --------------------------------------------------------------------------- "distributed"
def fully_shard(module):
    """Stand-in for FSDP's per-module sharding on a 1-rank mesh: every parameter the module owns
    directly is replaced by a new (sharded) parameter holding the same values."""
    for name, param in list(module.named_parameters(recurse=False)):
        module.register_parameter(name, nn.Parameter(param.detach().clone(), requires_grad=param.requires_grad))
    return module


def parallelize_model(model, fsdp_grouping_plan):
    for path in fsdp_grouping_plan:
        sub = model.get_submodule(path)
        for m in sub.modules():
            fully_shard(m)
    for m in model.modules():  # root wrap picks up whatever is left
        fully_shard(m)
    return model


def build_fsdp_grouping_plan(args):
    return [f"layers.{i}" for i in range(args.n_layers)] + ["tok_embeddings", "output"]


def consolidate_state_dict(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


# --------------------------------------------------------------------------- data
def make_corpus(n_seqs, seqlen, vocab, seed):
    """Sequences from a fixed sparse bigram table (each token has 3 likely successors)."""
    g = torch.Generator().manual_seed(1234)
    succ = torch.randint(0, vocab, (vocab, 3), generator=g)
    g = torch.Generator().manual_seed(seed)
    seqs = torch.empty(n_seqs, seqlen + 1, dtype=torch.long)
    seqs[:, 0] = torch.randint(0, vocab, (n_seqs,), generator=g)
    for t in range(1, seqlen + 1):
        choice = torch.randint(0, 3, (n_seqs,), generator=g)
        seqs[:, t] = succ[seqs[:, t - 1], choice]
    return seqs


def batches(seqs, bsz, seed):
    g = torch.Generator().manual_seed(seed)
    while True:
        for idx in torch.randperm(len(seqs), generator=g).split(bsz):
            if len(idx) == bsz:
                yield seqs[idx, :-1], seqs[idx, 1:]


# --------------------------------------------------------------------------- train / eval
def train(args, steps=120, lr=3e-3):
    torch.manual_seed(0)
    model = LMTransformer(args)
    model = parallelize_model(model, fsdp_grouping_plan=build_fsdp_grouping_plan(args))
    with torch.random.fork_rng():
        torch.manual_seed(args.seed)
        model.init_weights()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1, betas=(0.9, 0.95))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / 10) * 0.5 * (1 + math.cos(math.pi * s / steps)))
    data = batches(make_corpus(4096, args.max_seqlen, args.vocab_size, seed=1), 32, seed=0)
    for step in range(1, steps + 1):
        input_ids, labels = next(data)
        loss = model(input_ids, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        if step % 20 == 0:
            print(f"step: {step}  loss: {loss.item():.4f}  lr: {scheduler.get_last_lr()[0]:.2e}")
    return consolidate_state_dict(model)


@torch.no_grad()
def launch_eval(args, state_dict):
    model = LMTransformer(args)  # eval runs unsharded
    model.load_state_dict(state_dict)
    model.eval()
    seqs = make_corpus(512, args.max_seqlen, args.vocab_size, seed=2)
    return model(seqs[:, :-1], seqs[:, 1:]).item()


def main():
    args = LMTransformerArgs(weight_tying=True)
    state_dict = train(args)
    print(f"checkpoint: tok_embeddings == output ? "
          f"{torch.equal(state_dict['tok_embeddings.weight'], state_dict['output.weight'])}")
    print(f"eval loss: {launch_eval(args, state_dict):.4f}  (ln(vocab) = {math.log(args.vocab_size):.4f})")


if __name__ == "__main__":
    main()
