"""Healthy look-alike of gradient-checkpointing-no-grad: the same reentrant checkpoint
(use_reentrant=True) around blocks with adapters, but the embedding is trained too, so the blocks'
input requires grad and the reentrant checkpoint passes the gradient into every block."""
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.base = nn.Linear(width, width)
        self.adapter = nn.Sequential(nn.Linear(width, 4), nn.Linear(4, width))
        self.base.requires_grad_(False)

    def forward(self, h):
        return torch.relu(self.base(h) + self.adapter(h))


class Model(nn.Module):
    def __init__(self, vocab=100, width=32, depth=3, classes=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, classes)

    def forward(self, tokens):
        h = self.embed(tokens).mean(1)
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=True)
        return self.head(h)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 100, (512, 12), generator=g)
    y = tokens[:, 0] % 4
    model = Model()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    for step in range(60):
        idx = torch.randint(0, 512, (32,), generator=g)
        loss = nn.functional.cross_entropy(model(tokens[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
