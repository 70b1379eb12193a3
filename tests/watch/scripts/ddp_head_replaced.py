"""DDP on CPU (gloo), two ranks: the head is replaced after the optimizer was built, so on every
rank the head gets (all-reduced) gradients and never changes. Run with torchrun --nproc-per-node 2.
Each rank draws its own batches; with --same-data every rank draws the same ones (no sharding)."""
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    model[2] = nn.Linear(16, 3)
    ddp = DDP(model)
    g = torch.Generator().manual_seed(0 if "--same-data" in sys.argv else rank)
    try:
        for _ in range(30):
            x, y = torch.randn(32, 8, generator=g), torch.randint(0, 3, (32,), generator=g)
            optimizer.zero_grad()
            nn.functional.cross_entropy(ddp(x), y).backward()
            optimizer.step()
    finally:
        dist.destroy_process_group()
    print(f"rank {rank} of {os.environ.get('WORLD_SIZE')} done")


if __name__ == "__main__":
    main()
