"""Healthy: a residual MLP with stochastic depth under DistributedDataParallel: each block is
skipped at random on some steps (p = 0.3), so on those steps its parameters get no gradient, and
find_unused_parameters=True is what that design needs. Every block trains on the steps it runs."""
import socket

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class Block(nn.Module):
    def __init__(self, d, p_skip):
        super().__init__()
        self.fc, self.p_skip = nn.Linear(d, d), p_skip

    def forward(self, x):
        if self.training and torch.rand(()) < self.p_skip:
            return x
        return x + torch.relu(self.fc(x))


def main():
    torch.manual_seed(0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        net = nn.Sequential(nn.Linear(10, 32), *[Block(32, 0.3) for _ in range(4)], nn.Linear(32, 1))
        model = DistributedDataParallel(net, find_unused_parameters=True)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for _ in range(60):
            x = torch.randn(64, 10)
            loss = nn.functional.mse_loss(model(x), x[:, :1] * 2)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"mse {loss.item():.4f}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
