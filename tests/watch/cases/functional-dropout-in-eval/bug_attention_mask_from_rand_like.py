"""A small transformer classifier whose self-attention drops attention weights by hand:
`attn = attn * (torch.rand_like(attn) >= self.attn_drop) / (1 - self.attn_drop)`. The model is
handed to train(model, ...) and to evaluate(model, ...), which switches it to eval mode under
no_grad; the mask is drawn on every call whatever the mode, so validation scores change from run
to run and sit below what the trained weights give."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, SEQ, CLASSES = 50, 12, 3


class SelfAttention(nn.Module):
    def __init__(self, dim, heads=4, attn_drop=0.1):
        super().__init__()
        self.heads, self.attn_drop = heads, attn_drop
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).reshape(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1)) / (C // self.heads) ** 0.5
        attn = attn.softmax(dim=-1)
        attn = attn * (torch.rand_like(attn) >= self.attn_drop) / (1 - self.attn_drop)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, T, C))


class Classifier(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.pos = nn.Parameter(torch.zeros(1, SEQ, dim))
        self.block = SelfAttention(dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, CLASSES)

    def forward(self, ids):
        x = self.embed(ids) + self.pos
        x = x + self.block(self.norm(x))
        return self.head(x.mean(1))


def train(model, loader, optimizer):
    model.train()
    for ids, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(ids), y).backward()
        optimizer.step()


def evaluate(model, loader):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for ids, y in loader:
            total += F.cross_entropy(model(ids), y, reduction="sum").item()
    return total / len(loader.dataset)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (900, SEQ), generator=g)
    y = (ids[:, 0] % CLASSES)
    train_loader = DataLoader(TensorDataset(ids[:800], y[:800]), batch_size=32, shuffle=True, generator=g)
    val_loader = DataLoader(TensorDataset(ids[800:], y[800:]), batch_size=50)
    model = Classifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(3):
        train(model, train_loader, optimizer)
        print(f"epoch {epoch} val loss {evaluate(model, val_loader):.4f}")


if __name__ == "__main__":
    main()
