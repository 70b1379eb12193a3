"""The same multi-task classifier under DistributedDataParallel, whose auxiliary head is built only
when the config's auxiliary loss is on: with it off, every parameter DDP wraps takes part in the
loss and the reduction of each step completes."""
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
    def __init__(self, with_aux):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(12, 32), nn.ReLU())
        self.main_head = nn.Linear(32, 3)
        self.aux_head = nn.Linear(32, 2) if with_aux else None

    def forward(self, x):
        h = self.trunk(x)
        return self.main_head(h), (self.aux_head(h) if self.aux_head is not None else None)


def setup():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)


def train(cfg):
    model = DistributedDataParallel(MultiTask(with_aux=cfg.aux_weight > 0))
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
