"""Healthy: two losses computed first, then a backward() on each (the second one scaled and offset
by a constant for a logged baseline), and one optimizer step: every loss reaches a backward()."""
import torch
import torch.nn.functional as F
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 12, generator=g)
    y = (x[:, :3] * 2).argmax(1)
    body = nn.Sequential(nn.Linear(12, 32), nn.ReLU())
    head, recon = nn.Linear(32, 3), nn.Linear(32, 12)
    params = [*body.parameters(), *head.parameters(), *recon.parameters()]
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.9)
    for epoch in range(3):
        for i in range(0, 512, 32):
            xb, yb = x[i:i + 32], y[i:i + 32]
            h = body(xb)
            cls = F.cross_entropy(head(h), yb)
            rec = F.mse_loss(recon(h), xb)
            opt.zero_grad()
            cls.backward(retain_graph=True)
            (0.1 * rec + 1.0).backward()
            opt.step()
        print(f"epoch {epoch} cls {cls.item():.3f} rec {rec.item():.3f}")


if __name__ == "__main__":
    main()
