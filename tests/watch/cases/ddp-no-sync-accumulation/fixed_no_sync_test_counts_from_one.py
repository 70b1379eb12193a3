"""A text classifier trained under DistributedDataParallel (one process here; torchrun would start
one per GPU) with gradient accumulation over 4 micro-batches. A Trainer runs every micro-batch but
the window's last inside model.no_sync(); the loop counts micro-batches from 1 and both the sync
test and the step test read `it % accum == 0`, so the backward() right before each step() is the
one that all-reduces the accumulated gradients."""
import contextlib
import socket

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset


class BagOfEmbeddings(nn.Module):
    def __init__(self, vocab=200, dim=32, classes=4):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dim)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, classes))

    def forward(self, tokens):
        return self.head(self.embed(tokens))


def make_data(n=1024, length=12, vocab=200, classes=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, classes, (n,), generator=g)
    tokens = torch.randint(0, vocab, (n, length), generator=g)
    tokens[:, :3] = (y * 50)[:, None] + torch.randint(0, 50, (n, 3), generator=g)   # label-bearing words
    return TensorDataset(tokens, y)


class Trainer:
    def __init__(self, model, loader, accum=4, lr=0.05):
        self.model, self.loader, self.accum = model, loader, accum
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.criterion = nn.CrossEntropyLoss()

    def train_epoch(self):
        total = 0.0
        for it, (tokens, y) in enumerate(self.loader, start=1):
            boundary = it % self.accum == 0
            ctx = contextlib.nullcontext() if boundary else self.model.no_sync()
            with ctx:
                loss = self.criterion(self.model(tokens), y) / self.accum
                loss.backward()
            total += loss.item()
            if it % self.accum == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()
        return total * self.accum / len(self.loader)


def setup():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)


def main():
    torch.manual_seed(0)
    setup()
    try:
        model = DistributedDataParallel(BagOfEmbeddings())
        loader = DataLoader(make_data(), batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(0))
        trainer = Trainer(model, loader)
        for epoch in range(4):
            print(f"epoch {epoch} loss {trainer.train_epoch():.3f}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
