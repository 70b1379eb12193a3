"""The fixed twin: the model keeps float32 weights and the forward runs under
torch.autocast("cpu", dtype=torch.bfloat16), so the bf16 compute is kept and every update lands on
the fp32 weights, the token embedding and LayerNorm gains included."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, DIM = 96, 64


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.norm = nn.LayerNorm(DIM)
        self.mix = nn.Sequential(nn.Linear(2 * DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))
        self.out_norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        h = self.norm(self.tok(ids))
        prev = torch.cat([torch.zeros_like(h[:, :1]), h[:, :-1]], 1)
        h = h + self.mix(torch.cat([h, prev], -1))
        return self.head(self.out_norm(h))


class LMTrainer:
    def __init__(self, model, lr=1e-3):
        self.model = model
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.0)

    def step(self, ids):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = self.model(ids[:, :-1]).float()
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def make_batch(table, g, n=32, length=24):
    ids = torch.empty(n, length, dtype=torch.long)
    ids[:, 0] = torch.randint(0, VOCAB, (n,), generator=g)
    for t in range(1, length):
        noise = torch.randint(0, VOCAB, (n,), generator=g)
        keep = torch.rand(n, generator=g) < 0.8
        ids[:, t] = torch.where(keep, table[ids[:, t - 1]], noise)
    return ids


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    table = torch.randperm(VOCAB, generator=g)
    trainer = LMTrainer(TinyLM())
    for step in range(120):
        loss = trainer.step(make_batch(table, g))
        if step % 30 == 0:
            print(f"step {step} loss {loss:.3f}")


if __name__ == "__main__":
    main()
