"""A small GPT-style language model whose attention calls F.scaled_dot_product_attention with
`dropout_p=self.attn_dropout` on every call. A Trainer class trains it on next-token prediction and
its validate() method, every 10 steps, puts the model in eval mode under no_grad; the attention
kernel has no training flag of its own, so model.eval() never reaches that dropout and the
validation loss is measured with attention weights dropped at random."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, SEQ = 40, 16


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads, attn_dropout):
        super().__init__()
        self.heads, self.attn_dropout = heads, attn_dropout
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_dropout, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, dim, heads, attn_dropout):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, attn_dropout)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, dim=32, heads=4, layers=2, attn_dropout=0.2):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, dim)
        self.pos = nn.Embedding(SEQ, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads, attn_dropout) for _ in range(layers)])
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        return self.head(self.blocks(x))


class Trainer:
    def __init__(self, model, data, val_data, lr=3e-3):
        self.model, self.data, self.val_data = model, data, val_data
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        self.g = torch.Generator().manual_seed(1)

    def batch(self, data):
        rows = torch.randint(0, data.shape[0], (32,), generator=self.g)
        return data[rows, :-1], data[rows, 1:]

    def loss(self, x, y):
        logits = self.model(x)
        return F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))

    def validate(self):
        self.model.eval()
        with torch.no_grad():
            losses = [self.loss(*self.batch(self.val_data)).item() for _ in range(3)]
        self.model.train()
        return sum(losses) / len(losses)

    def fit(self, steps):
        self.model.train()
        for step in range(1, steps + 1):
            loss = self.loss(*self.batch(self.data))
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if step % 10 == 0:
                print(f"step {step} train {loss.item():.3f} val {self.validate():.3f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    start = torch.randint(0, VOCAB, (600, 1), generator=g)
    data = (start + torch.arange(SEQ + 1)) % VOCAB  # counting sequences: each token is the previous plus one
    Trainer(TinyGPT(), data[:500], data[500:]).fit(60)


if __name__ == "__main__":
    main()
