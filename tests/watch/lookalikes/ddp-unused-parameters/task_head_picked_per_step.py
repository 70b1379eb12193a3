"""Healthy: a multi-task model under DistributedDataParallel with twelve task heads, one picked at
random for each step (find_unused_parameters=True, as that design needs). On the steps kb watch
samples, some heads happen never to be picked, yet each of them trains on the steps in between."""
import socket

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

TASKS = 12


class MultiTask(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.heads = nn.ModuleList(nn.Linear(32, 2) for _ in range(TASKS))

    def forward(self, x, task):
        return self.heads[task](self.trunk(x))


def main():
    torch.manual_seed(0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        model = DistributedDataParallel(MultiTask(), find_unused_parameters=True)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(1)
        for _ in range(60):
            task = int(torch.randint(0, TASKS, (), generator=g))
            x = torch.randn(32, 16)
            y = (x[:, task % 16] > 0).long()
            loss = nn.functional.cross_entropy(model(x, task), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"loss {loss.item():.3f}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
