"""Gradient accumulation under DistributedDataParallel (one process here; torchrun would start one per
GPU) where every backward() runs inside model.no_sync() and the accumulated gradients are then
all-reduced by hand (dist.all_reduce of each .grad, divided by the world size) right before the
step, the pattern of scripts that overlap or compress communication themselves. No backward()
synchronises through DDP, yet every rank steps with the same averaged gradient: correct."""
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


def average_gradients(model):
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad.div_(world)


def main():
    torch.manual_seed(0)
    setup()
    try:
        net = nn.Sequential(nn.Linear(20, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1))
        model = DistributedDataParallel(net)
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
        w = torch.randn(20, 1, generator=torch.Generator().manual_seed(1))
        accum = 4
        for step in range(60):
            for _ in range(accum):
                x = torch.randn(32, 20)
                y = torch.sin(x @ w)
                with model.no_sync():
                    loss = nn.functional.mse_loss(model(x), y) / accum
                    loss.backward()
            average_gradients(model)
            opt.step()
            opt.zero_grad()
            if step % 20 == 0:
                print(f"step {step} loss {loss.item() * accum:.4f}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
