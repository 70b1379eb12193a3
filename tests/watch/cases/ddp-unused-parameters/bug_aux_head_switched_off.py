"""A multi-task classifier trained under DistributedDataParallel (one process here; torchrun
would start one per GPU). Its auxiliary head is built in __init__ whatever the config says, but
the config switched the auxiliary loss off, so the head's weight and bias never get a gradient:
DDP, built with find_unused_parameters=False, waits for them and the second forward raises
"Expected to have finished reduction in the prior iteration"."""
import socket
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


@dataclass
class Config:
    aux_weight: float = 0.0  # auxiliary loss switched off for this run
    lr: float = 0.05
    steps: int = 60


class MultiTask(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(12, 32), nn.ReLU())
        self.main_head = nn.Linear(32, 3)
        self.aux_head = nn.Linear(32, 2)

    def forward(self, x):
        h = self.trunk(x)
        return self.main_head(h), self.aux_head(h)


def setup():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)


def train(cfg):
    model = DistributedDataParallel(MultiTask())
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr)
    for _ in range(cfg.steps):
        x = torch.randn(32, 12)
        y, y_aux = (x[:, 0] > 0).long() + (x[:, 1] > 0).long(), (x[:, 2] > 0).long()
        out, aux = model(x)
        loss = nn.functional.cross_entropy(out, y)
        if cfg.aux_weight > 0:
            loss = loss + cfg.aux_weight * nn.functional.cross_entropy(aux, y_aux)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    setup()
    try:
        print(f"loss {train(Config()):.3f}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
