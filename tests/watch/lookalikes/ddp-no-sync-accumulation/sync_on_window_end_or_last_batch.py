"""Gradient accumulation under DistributedDataParallel (one process here; torchrun would start one per
GPU) in the way Hugging Face Accelerate does it: a micro-batch synchronises when it closes an
accumulation window or is the last batch of the epoch, so the short window at the end of each epoch
(22 batches, accumulation 4: two leftovers) also ends on a synchronised backward() before its step.
Every window's last backward() all-reduces: correct."""
import contextlib
import socket

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset


def setup():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)


class Accumulator:
    def __init__(self, model, steps, num_batches):
        self.model, self.steps, self.num_batches = model, steps, num_batches

    def sync_gradients(self, index):
        return (index + 1) % self.steps == 0 or index + 1 == self.num_batches

    def context(self, index):
        return contextlib.nullcontext() if self.sync_gradients(index) else self.model.no_sync()


def main():
    torch.manual_seed(0)
    setup()
    try:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(22 * 16, 10, generator=g)
        y = (x[:, :3].sum(1) > 0).long()
        loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=g)
        model = DistributedDataParallel(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2)))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        acc = Accumulator(model, steps=4, num_batches=len(loader))
        for epoch in range(10):
            for i, (xb, yb) in enumerate(loader):
                with acc.context(i):
                    loss = nn.functional.cross_entropy(model(xb), yb) / acc.steps
                    loss.backward()
                if acc.sync_gradients(i):
                    opt.step()
                    opt.zero_grad()
            print(f"epoch {epoch} loss {loss.item() * acc.steps:.3f}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
