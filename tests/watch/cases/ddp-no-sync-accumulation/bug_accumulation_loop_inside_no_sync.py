"""A tabular regressor trained under DistributedDataParallel (one process here; torchrun would start
one per GPU) with gradient accumulation over 8 micro-batches. To save communication, the whole
inner loop, the last micro-batch included, runs inside `with model.no_sync():`, and step() follows
the block. No backward() ever all-reduces: on several GPUs each rank would step with its own local
gradient, and the replicas, identical at construction, would drift apart."""
import socket

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def setup():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)


class TabularNet(nn.Module):
    def __init__(self, features=16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, 64), nn.SiLU(), nn.Linear(64, 32), nn.SiLU(), nn.Linear(32, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


def micro_batches(g, accum, size=24, features=16):
    for _ in range(accum):
        x = torch.randn(size, features, generator=g)
        yield x, x[:, :4].sum(1) - 0.5 * x[:, 4:8].prod(1)


def train(model, optimizer, steps=60, accum=8):
    g = torch.Generator().manual_seed(0)
    for step in range(steps):
        with model.no_sync():
            for x, y in micro_batches(g, accum):
                loss = nn.functional.mse_loss(model(x), y) / accum
                loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item() * accum:.4f}")


def main():
    torch.manual_seed(0)
    setup()
    try:
        model = DistributedDataParallel(TabularNet())
        train(model, torch.optim.Adam(model.parameters(), lr=1e-3))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
