"""A Lightning-style setup with gradient accumulation: the module's configure_optimizers() returns
Adam and a linear-warmup / inverse-square-root LambdaLR sized in optimizer steps (warmup of 64
steps), and a small Trainer(accumulate_grad_batches=8) steps the optimizer every 8 batches but
steps the scheduler after every batch. The schedule therefore advances 8 times per update: the
warmup is over after 8 real updates and the run jumps to the peak rate almost at once.

Thread: https://github.com/Lightning-AI/pytorch-lightning/issues/1476
"""
import torch
import torch.nn.functional as F
from torch import nn


class Trainer:
    def __init__(self, max_epochs, accumulate_grad_batches=1):
        self.max_epochs, self.accumulate_grad_batches = max_epochs, accumulate_grad_batches
        self.global_step = 0

    def fit(self, model, train_dataloader):
        optimizers, schedulers = model.configure_optimizers()
        optimizer, scheduler = optimizers[0], schedulers[0]
        for epoch in range(self.max_epochs):
            model.train()
            for batch_idx, batch in enumerate(train_dataloader):
                loss = model.training_step(batch, batch_idx) / self.accumulate_grad_batches
                loss.backward()
                if (batch_idx + 1) % self.accumulate_grad_batches == 0:
                    optimizer.step()
                    optimizer.zero_grad()
                    self.global_step += 1
                    if self.global_step % 8 == 0:
                        print(f"epoch {epoch} optimizer step {self.global_step} "
                              f"loss {loss.item() * self.accumulate_grad_batches:.4f} "
                              f"lr {optimizer.param_groups[0]['lr']:.2e}")
                scheduler.step()


class TransformerLM(nn.Module):
    def __init__(self, vocab=48, dim=64, peak_lr=3e-3, warmup_steps=64):
        super().__init__()
        self.peak_lr, self.warmup_steps = peak_lr, warmup_steps
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(16, dim) * 0.02)
        self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, x):
        T = x.size(1)
        mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        h = self.emb(x) + self.pos[:T]
        a = self.ln1(h)
        h = h + self.attn(a, a, a, attn_mask=mask, need_weights=False)[0]
        h = h + self.ff(self.ln2(h))
        return self.out(h)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x).flatten(0, 1), y.flatten())

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.peak_lr, betas=(0.9, 0.98))

        def inverse_sqrt_with_warmup(step):
            step = max(step, 1)
            return min(step / self.warmup_steps, (self.warmup_steps / step) ** 0.5)

        return [optimizer], [torch.optim.lr_scheduler.LambdaLR(optimizer, inverse_sqrt_with_warmup)]


def token_batches(n_batches, batch_size=8, seq_len=16, vocab=48, seed=0):
    g = torch.Generator().manual_seed(seed)
    trans = torch.randint(0, vocab, (vocab,), generator=torch.Generator().manual_seed(2))
    out = []
    for _ in range(n_batches):
        seq = torch.empty(batch_size, seq_len + 1, dtype=torch.long)
        seq[:, 0] = torch.randint(0, vocab, (batch_size,), generator=g)
        for t in range(seq_len):
            noise = torch.rand(batch_size, generator=g) < 0.1
            seq[:, t + 1] = torch.where(noise, torch.randint(0, vocab, (batch_size,), generator=g), trans[seq[:, t]])
        out.append((seq[:, :-1], seq[:, 1:]))
    return out


def main():
    torch.manual_seed(0)
    trainer = Trainer(max_epochs=2, accumulate_grad_batches=8)
    trainer.fit(TransformerLM(), token_batches(320))


if __name__ == "__main__":
    main()
