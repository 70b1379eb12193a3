"""The same encoder and fine-tuning, with the unused pooler frozen (requires_grad=False) before the
model is wrapped: DDP leaves it out of its buckets, and find_unused_parameters is no longer needed."""
import socket

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class Encoder(nn.Module):
    def __init__(self, vocab=500, dim=48):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mix = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))
        self.pooler = nn.Linear(dim, dim)  # used in pre-training only


class Classifier(nn.Module):
    def __init__(self, encoder, classes=4):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.embed.embedding_dim, classes)

    def forward(self, ids):
        h = self.encoder.mix(self.encoder.embed(ids))
        return self.head(h.mean(1))


def setup():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)


def fine_tune(model, steps=60):
    model.encoder.pooler.requires_grad_(False)  # not used by this task
    model = DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(steps):
        ids = torch.randint(0, 500, (16, 24))
        y = ids[:, 0] % 4
        loss = nn.functional.cross_entropy(model(ids), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    setup()
    try:
        print(f"loss {fine_tune(Classifier(Encoder())):.3f}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
