"""Healthy: SGDR on purpose, CosineAnnealingWarmRestarts stepped per batch with a cycle of 15
steps: the rate falls to its floor and jumps back at every restart, as designed."""
import torch
import torch.nn.functional as F
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 10, generator=g)
    y = (x[:, :4] @ torch.randn(4, 4, generator=g)).argmax(1)
    model = nn.Sequential(nn.Linear(10, 40), nn.ReLU(), nn.Linear(40, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=15)
    for epoch in range(4):
        for i in range(0, 640, 32):
            loss = F.cross_entropy(model(x[i:i + 32]), y[i:i + 32])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
