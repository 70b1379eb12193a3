"""Speculative-decoding draft trainer that casts the whole draft model to bf16.

Shape of the user's code: a `Trainer` class configured by a `TrainerConfig`
NamedTuple (lr, epochs, scheduler, `hidden_states_dtype=torch.bfloat16`); its
`setup_model()` moves the draft model to `hidden_states_dtype`, `setup_optimizer()`
builds AdamW plus a linear warmup/decay schedule, and `train_epoch()` runs
forward -> zero_grad -> backward -> clip_grad_norm_(1.0) -> step -> scheduler.step,
with the draft returning (draft_tokens, loss, metrics).
Bug: the parameters themselves live in bf16 and there is no fp32 master copy, so
AdamW updates smaller than half a bf16 ULP are rounded away. Every RMSNorm gain
starts at 1.0 (ULP 2^-7) and never moves; as the LR decays the other weights
freeze too, and the draft ends far less accurate than with fp32 master weights.
Thread: https://github.com/vllm-project/speculators/pull/711
"""
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

HIDDEN = 64
VOCAB = 16


class TrainerConfig(NamedTuple):
    lr: float
    num_epochs: int
    weight_decay: float = 0.01
    scheduler_warmup_steps: int | None = None
    hidden_states_dtype: torch.dtype = torch.bfloat16
    log_freq: int = 48


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(var + self.eps)).to(x.dtype) * self.weight


class DraftModel(nn.Module):
    """Tiny stand-in for an EAGLE-style draft head: fuses the verifier's hidden
    state with the embedding of the current token and predicts the next one."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.fc = nn.Linear(2 * HIDDEN, HIDDEN, bias=False)
        self.input_norm = RMSNorm(HIDDEN)
        self.up = nn.Linear(HIDDEN, 2 * HIDDEN, bias=False)
        self.down = nn.Linear(2 * HIDDEN, HIDDEN, bias=False)
        self.norm = RMSNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, hidden_states, input_ids, labels):
        emb = self.embed(input_ids).to(hidden_states.dtype)
        h = self.fc(torch.cat([hidden_states, emb], dim=-1))
        h = h + self.down(F.silu(self.up(self.input_norm(h))))
        logits = self.lm_head(self.norm(h)).float()
        loss = F.cross_entropy(logits, labels)
        draft_tokens = logits.argmax(-1)
        metrics = {"loss": loss.detach(), "acc": (draft_tokens == labels).float().mean()}
        return draft_tokens, loss, metrics


class Trainer:
    def __init__(self, model, config, train_loader, val_loader):
        self.model = model
        self.config = config
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.global_step = 0
        self.setup_model()
        self.setup_optimizer()

    def setup_model(self):
        # the draft is cast to the dtype of the verifier's hidden states
        self.model.to(self.config.hidden_states_dtype)

    def setup_optimizer(self):
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=self.config.lr, weight_decay=self.config.weight_decay
        )
        total = self.config.num_epochs * len(self.train_loader)
        warmup = self.config.scheduler_warmup_steps or total // 100

        def linear_with_warmup(step):
            if step < warmup:
                return (step + 1) / warmup
            return max(0.0, (total - step) / max(1, total - warmup))

        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, linear_with_warmup)

    def train_epoch(self, epoch):
        self.model.train()
        for batch in self.train_loader:
            hidden_states, input_ids, labels = batch
            _draft, loss, metrics = self.model(hidden_states, input_ids, labels)
            self.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            lr = self.optimizer.param_groups[0]["lr"]
            self.scheduler.step()
            if self.global_step % self.config.log_freq == 0:
                print(f"epoch {epoch} step {self.global_step:4d} lr {lr:.2e} "
                      f"loss {metrics['loss'].item():.4f} acc {metrics['acc'].item():.3f}")
            self.global_step += 1

    @torch.no_grad()
    def val_epoch(self, epoch):
        self.model.eval()
        tot_loss, tot_acc, n = 0.0, 0.0, 0
        for hidden_states, input_ids, labels in self.val_loader:
            _draft, loss, metrics = self.model(hidden_states, input_ids, labels)
            tot_loss += metrics["loss"].item()
            tot_acc += metrics["acc"].item()
            n += 1
        print(f"epoch {epoch} val loss {tot_loss / n:.4f} val acc {tot_acc / n:.3f}")
        return tot_loss / n, tot_acc / n

    def run_training(self):
        for epoch in range(self.config.num_epochs):
            self.train_epoch(epoch)
            result = self.val_epoch(epoch)
        return result


def make_data(gen, n):
    # "verifier" hidden states arrive in bf16, as they would from the serving engine
    hidden = torch.randn(n, HIDDEN, generator=gen)
    ids = torch.randint(0, VOCAB, (n,), generator=gen)
    return hidden, ids


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    # teacher: the verifier's next token is a sharp function of hidden state + token
    w_h = torch.randn(HIDDEN, VOCAB, generator=gen) / HIDDEN ** 0.5
    w_t = torch.randn(VOCAB, VOCAB, generator=gen)

    def label(hidden, ids):
        return (4.0 * hidden @ w_h + 0.5 * w_t[ids]).argmax(-1)

    h_tr, id_tr = make_data(gen, 4096)
    h_va, id_va = make_data(gen, 1024)
    train = TensorDataset(h_tr.bfloat16(), id_tr, label(h_tr, id_tr))
    val = TensorDataset(h_va.bfloat16(), id_va, label(h_va, id_va))
    train_loader = DataLoader(train, batch_size=64, shuffle=True,
                              generator=torch.Generator().manual_seed(1))
    val_loader = DataLoader(val, batch_size=256)

    config = TrainerConfig(lr=3e-4, num_epochs=3, scheduler_warmup_steps=20)
    model = DraftModel()
    trainer = Trainer(model, config, train_loader, val_loader)
    val_loss, val_acc = trainer.run_training()

    norms = torch.cat([model.input_norm.weight.detach().float(), model.norm.weight.detach().float()])
    print(f"final val loss {val_loss:.4f} val acc {val_acc:.3f}")
    print(f"norm gains still exactly 1.0: {(norms == 1.0).float().mean().item():.1%}  "
          f"param dtype {next(model.parameters()).dtype}")


if __name__ == "__main__":
    main()
