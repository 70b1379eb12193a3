"""An SFT training engine in the style of an RL/SFT framework's FSDP backend: a config
dataclass names the model dtype, the engine's `_create_llm` builds the causal LM and
casts it to that dtype, `create_optimizer` hands `model.parameters()` to plain
`torch.optim.AdamW` with a warmup + cosine schedule, and `train_batch` runs forward,
a masked token cross-entropy on the response tokens, backward, gradient clipping,
`optimizer.step()` and the scheduler step. The bug: with `dtype="bfloat16"` the
parameters themselves live in bf16 and AdamW silently inherits that dtype, so there is
no fp32 master copy and the Adam moments are bf16 too. Every update smaller than half
a bf16 rounding step of its weight (about 0.2% of the weight's magnitude) is rounded
away: most token-embedding entries (magnitude ~1) never move at all, and as the
cosine schedule decays the learning rate more and more of the other weights freeze, so the loss
plateaus well above what the same recipe reaches with fp32 storage. Nothing errors and
the loss and gradient norm look normal.

Thread: https://github.com/areal-project/AReaL/issues/1292
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class TrainEngineConfig:
    dtype: str = "bfloat16"  # storage dtype of the model parameters
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    total_steps: int = 220
    grad_clip: float = 1.0
    vocab: int = 48
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyCausalLM(nn.Module):
    def __init__(self, cfg, max_len=64):
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(max_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg.d_model, cfg.n_heads) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1])
        x = self.tok(ids) + self.pos(pos)[None]
        for blk in self.blocks:
            x = blk(x)
        return self.lm_head(self.ln_f(x))


class FSDPEngine:
    def __init__(self, config):
        self.config = config
        self.model = None
        self.optimizer = None
        self.lr_scheduler = None

    def _create_llm(self):
        dtype = getattr(torch, self.config.dtype)
        torch.manual_seed(0)
        # the whole model, weights included, is stored in the compute dtype
        self.model = TinyCausalLM(self.config).to(dtype=dtype)

    def create_optimizer(self):
        cfg = self.config
        # AdamW takes its state dtype from the parameters: bf16 params, bf16 moments,
        # and the update is written straight back into bf16 weights
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.95)
        )
        warmup = int(cfg.warmup_ratio * cfg.total_steps)

        def lr_lambda(step):
            if step < warmup:
                return (step + 1) / warmup
            progress = (step - warmup) / max(1, cfg.total_steps - warmup)
            return 0.5 * (1.0 + math.cos(math.pi * progress))

        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda)

    def initialize(self):
        self._create_llm()
        self.create_optimizer()

    def train_batch(self, input_ids, loss_mask):
        self.model.train()
        logits = self.model(input_ids[:, :-1]).float()
        targets = input_ids[:, 1:]
        mask = loss_mask[:, 1:].float()
        per_tok = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
        loss = (per_tok * mask.reshape(-1)).sum() / mask.sum()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.optimizer.step()
        self.lr_scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return {"loss": loss.item(), "grad_norm": float(grad_norm), "lr": self.lr_scheduler.get_last_lr()[0]}


def make_sft_batch(gen, batch_size, vocab, prompt_len=10):
    # prompt: random tokens 2..vocab-1, then a separator (1), response: the prompt
    # with every token shifted by 3 (mod range), so the response is learnable
    prompt = torch.randint(2, vocab, (batch_size, prompt_len), generator=gen)
    response = (prompt - 2 + 3) % (vocab - 2) + 2
    sep = torch.ones(batch_size, 1, dtype=torch.long)
    ids = torch.cat([prompt, sep, response], dim=1)
    loss_mask = torch.zeros_like(ids)
    loss_mask[:, prompt_len + 1:] = 1  # train on the response only
    return ids, loss_mask


def main():
    torch.manual_seed(0)
    cfg = TrainEngineConfig()
    engine = FSDPEngine(cfg)
    engine.initialize()
    print(f"param dtype: {next(engine.model.parameters()).dtype}")
    gen = torch.Generator().manual_seed(1)
    emb_before = engine.model.tok.weight.detach().float().clone()
    history = []
    for step in range(cfg.total_steps):
        ids, mask = make_sft_batch(gen, 16, cfg.vocab)
        stats = engine.train_batch(ids, mask)
        history.append(stats["loss"])
        if step % 20 == 0 or step == cfg.total_steps - 1:
            print(f"step {step:3d} loss {stats['loss']:.4f} grad_norm {stats['grad_norm']:.3f} lr {stats['lr']:.2e}")
    moved = (engine.model.tok.weight.detach().float() != emb_before).float().mean().item()
    print(f"last-20 mean loss {sum(history[-20:]) / 20:.4f}; token-embedding entries changed: {moved:.1%}")


if __name__ == "__main__":
    main()
