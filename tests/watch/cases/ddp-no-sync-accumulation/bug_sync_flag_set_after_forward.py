"""A small image regressor trained under DistributedDataParallel (one process here; torchrun would
start one per GPU). Each batch from the loader is split into micro-batches that fit in memory, and a
LightningModule-like class runs them through training_step() and backward_step(). To all-reduce
only once per batch, backward_step() sets `model.require_backward_grad_sync = is_last` just before
backward(). DDP reads that flag in the forward, which has already run: the last micro-batch's
backward stays unsynchronised (the flag was still False from the one before) and the first one of
the next batch synchronises, so on several GPUs every rank would step with the mean of the first
micro-batches plus its own unreduced remainder."""
import socket

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset


class SmallConvRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.out = nn.Linear(16, 1)

    def forward(self, x):
        return self.out(self.body(x)).squeeze(-1)


class RegressionTask:
    def __init__(self, model, micro_batches=3, lr=3e-3):
        self.model, self.micro_batches = model, micro_batches
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def training_step(self, x, y):
        return F.mse_loss(self.model(x), y)

    def backward_step(self, loss, is_last):
        self.model.require_backward_grad_sync = is_last
        (loss / self.micro_batches).backward()

    def fit_batch(self, x, y):
        chunks = list(zip(x.chunk(self.micro_batches), y.chunk(self.micro_batches)))
        total = 0.0
        for i, (xc, yc) in enumerate(chunks):
            loss = self.training_step(xc, yc)
            self.backward_step(loss, is_last=i == len(chunks) - 1)
            total += loss.item() / len(chunks)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return total


def make_data(n=960, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, 12, 12, generator=g)
    y = x[:, 0, 3:9, 3:9].mean(dim=(1, 2)) * 4 - 2
    return TensorDataset(x, y)


def setup():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)


def main():
    torch.manual_seed(0)
    setup()
    try:
        task = RegressionTask(DistributedDataParallel(SmallConvRegressor()))
        loader = DataLoader(make_data(), batch_size=48, shuffle=True, generator=torch.Generator().manual_seed(0))
        for epoch in range(4):
            losses = [task.fit_batch(x, y) for x, y in loader]
            print(f"epoch {epoch} mse {sum(losses) / len(losses):.4f}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
