"""A small GPT trained with a NorMuon-style optimizer, shaped like an optimizer library:
a `torch.optim.Optimizer` subclass whose param groups carry an `algorithm` key
("normuon" for the 2-D weight matrices of the transformer blocks, "adamw" for
embeddings, the LM head and the norm gains); the NorMuon path updates momentum,
orthogonalises it with a Newton-Schulz iteration, rescales each output neuron by a
running second moment (`normuon_normalization`) and restores the Frobenius norm with a
ratio `||U|| / ||U_normalised||` before the scaled update. The model zero-initialises the
output projections of attention and MLP (a common modded-nanoGPT recipe). The bug: with
those projections at zero, the matrices in front of them (qkv and the MLP up-projection)
get an exactly zero gradient on the first step, so U is all zeros, both norms are 0 and
the ratio is 0/0 = NaN. The NaN update poisons those weights, the loss is NaN from the
second step on and stays NaN for the rest of the run, with no exception raised.

Thread: https://github.com/microsoft/dion/pull/24
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import Optimizer


def zeropower_via_newtonschulz5(G, steps=5, eps=1e-7):
    a, b, c = (3.4445, -4.7750, 2.0315)
    X = G.float()
    transposed = X.size(-2) > X.size(-1)
    if transposed:
        X = X.mT
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + eps)
    for _ in range(steps):
        A = X @ X.mT
        B = b * A + c * A @ A
        X = a * X + B @ X
    if transposed:
        X = X.mT
    return X


def adjust_lr_rms_norm(lr, shape):
    fan_out, fan_in = shape
    return lr * 0.2 * math.sqrt(max(fan_out, fan_in))


def normuon_normalization(U, V, muon_beta2):
    norm_U = [u.norm(p=2, dim=(-2, -1), keepdim=True) for u in U]
    neuron_norms = [(u * u).mean(dim=-1, keepdim=True) for u in U]
    torch._foreach_lerp_(V, neuron_norms, 1 - muon_beta2)
    denom = torch._foreach_sqrt(V)
    torch._foreach_add_(denom, 1e-8)
    normalized_U = torch._foreach_div(U, denom)
    norm_U_new = [nu.norm(p=2, dim=(-2, -1), keepdim=True) for nu in normalized_U]
    ratio = torch._foreach_div(norm_U, norm_U_new)  # 0 / 0 when U is all zeros
    torch._foreach_mul_(normalized_U, ratio)
    return normalized_U


class NorMuon(Optimizer):
    def __init__(self, param_groups, lr=0.02, mu=0.95, muon_beta2=0.95, betas=(0.9, 0.95),
                 weight_decay=0.0, epsilon=1e-8):
        defaults = dict(lr=lr, mu=mu, muon_beta2=muon_beta2, betas=betas,
                        weight_decay=weight_decay, epsilon=epsilon, algorithm="normuon")
        super().__init__(param_groups, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            if group["algorithm"] == "normuon":
                self._normuon_step(group)
            elif group["algorithm"] == "adamw":
                self._adamw_step(group)
            else:
                raise ValueError(group["algorithm"])

    def _normuon_step(self, group):
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if not state:
                state["momentum"] = torch.zeros_like(p)
                state["variance_neuron"] = torch.zeros(p.shape[0], 1)
            M = state["momentum"]
            M.lerp_(p.grad, 1 - group["mu"])
            U = p.grad.lerp(M, group["mu"])  # nesterov
            U = zeropower_via_newtonschulz5(U)
            U = normuon_normalization([U], [state["variance_neuron"]], group["muon_beta2"])[0]
            lr = adjust_lr_rms_norm(group["lr"], p.shape)
            p.mul_(1 - group["lr"] * group["weight_decay"])
            p.add_(U.to(p.dtype), alpha=-lr)

    def _adamw_step(self, group):
        b1, b2 = group["betas"]
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["m"] = torch.zeros_like(p)
                state["v"] = torch.zeros_like(p)
            state["step"] += 1
            state["m"].lerp_(p.grad, 1 - b1)
            state["v"].lerp_(p.grad.square(), 1 - b2)
            mhat = state["m"] / (1 - b1 ** state["step"])
            vhat = state["v"] / (1 - b2 ** state["step"])
            p.mul_(1 - group["lr"] * group["weight_decay"])
            p.addcdiv_(mhat, vhat.sqrt().add_(group["epsilon"]), value=-group["lr"])


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.c_proj = nn.Linear(d, d, bias=False)
        self.c_fc = nn.Linear(d, 4 * d, bias=False)
        self.mlp_proj = nn.Linear(4 * d, d, bias=False)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        nn.init.zeros_(self.c_proj.weight)  # zero-init output projections
        nn.init.zeros_(self.mlp_proj.weight)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp_proj(F.relu(self.c_fc(self.ln2(x))).square())


class GPT(nn.Module):
    def __init__(self, vocab=64, d=64, n_layers=2, h=4, max_len=32):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d, h) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))[None]
        for blk in self.blocks:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def get_batch(gen, bsz=16, t=24, vocab=64):
    # repeating patterns: each sequence is a random 6-token motif tiled, so it is learnable
    motif = torch.randint(0, vocab, (bsz, 6), generator=gen)
    seq = motif.repeat(1, (t + 1) // 6 + 1)[:, :t + 1]
    return seq[:, :-1], seq[:, 1:]


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = GPT()
    matrices = [p for n, p in model.blocks.named_parameters() if p.ndim == 2]
    others = [p for n, p in model.named_parameters() if not (n.startswith("blocks.") and p.ndim == 2)]
    optimizer = NorMuon([
        dict(params=matrices, algorithm="normuon", lr=0.02),
        dict(params=others, algorithm="adamw", lr=3e-3),
    ], weight_decay=0.0)
    for step in range(150):
        x, y = get_batch(gen)
        loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 15 == 0 or step == 149:
            print(f"step {step:3d} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
