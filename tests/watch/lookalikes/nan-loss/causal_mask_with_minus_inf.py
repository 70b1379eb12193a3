"""Healthy look-alike of nan-loss: self-attention whose scores are masked with -inf above the
diagonal (a causal mask). Every row keeps at least its own position, so the softmax never sees a
row of -inf only, and neither the loss nor the gradient is ever non-finite."""
import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim=32, length=12):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.register_buffer("future", torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1))

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(1, 2) / math.sqrt(x.shape[-1])
        scores = scores.masked_fill(self.future, float("-inf"))
        return self.out(scores.softmax(-1) @ v)


class TinyLM(nn.Module):
    def __init__(self, vocab=50, dim=32, length=12):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.attention = CausalSelfAttention(dim, length)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        h = self.embed(tokens)
        return self.head(self.norm(h + self.attention(h)))


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = torch.randint(0, 50, (512, 13), generator=g)
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(60):
        batch = data[(step * 32) % 512:(step * 32) % 512 + 32]
        logits = model(batch[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, 50), batch[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
