"""A nanoGPT-shaped model: hand-written causal self-attention blocks that project q, k, v with one
Linear, split the heads and call F.scaled_dot_product_attention; the dataset serves (x, y) windows
with y the next tokens, and the loss reads the model's (B, T, V) logits flattened. The attention
call passes is_causal=True, so each position attends to itself and the tokens before it. A train(model, loader, optimizer, device) function runs the loop with a
cosine schedule."""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

VOCAB, BLOCK, DIM, HEADS = 64, 24, 64, 4


class Windows(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        start = torch.randint(0, VOCAB, (n, 1), generator=g)
        step = torch.randint(1, 4, (n, 1), generator=g)
        self.data = (start + step * torch.arange(BLOCK + 1)) % VOCAB   # arithmetic runs of tokens

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i, :-1], self.data[i, 1:]


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(DIM, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=True)   # fixed
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.attn = SelfAttention()
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, layers=2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, DIM), nn.Embedding(BLOCK, DIM)
        self.blocks = nn.Sequential(*[Block() for _ in range(layers)])
        self.ln_f = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, idx, targets=None):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        logits = self.lm_head(self.ln_f(self.blocks(x)))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
        return logits, loss


def train(model, loader, optimizer, device, max_steps):
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max_steps)
    model.train()
    for it, (x, y) in enumerate(loader):
        _, loss = model(x.to(device), y.to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        if it % 20 == 0:
            print(f"iter {it} loss {loss.item():.4f} (uniform {math.log(VOCAB):.2f})")
        if it + 1 >= max_steps:
            break


def main():
    torch.manual_seed(0)
    loader = DataLoader(Windows(4096, seed=0), batch_size=32, shuffle=True)
    model = GPT()
    train(model, loader, torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95)), "cpu", 80)


if __name__ == "__main__":
    main()
