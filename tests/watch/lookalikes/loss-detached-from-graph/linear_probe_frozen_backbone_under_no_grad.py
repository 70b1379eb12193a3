"""Healthy look-alike of loss-detached-from-graph: a linear probe. The pretrained-style backbone is
frozen with requires_grad_(False) and run under torch.no_grad() in every training step; the
optimizer is built over model.parameters() (the frozen ones included, as many probe scripts do),
and only the linear head learns, on purpose."""
import torch
import torch.nn.functional as F
from torch import nn


class Probe(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, classes)
        self.backbone.requires_grad_(False)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = Probe()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    w = torch.randn(20, 4, generator=g)
    for step in range(70):
        x = torch.randn(32, 20, generator=g)
        y = (x @ w).argmax(1)
        with torch.no_grad():
            feats = model.backbone(x)
        loss = F.cross_entropy(model.head(feats), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
