"""Healthy look-alike of optimizer-step-order (no backward() before step()): a meta-learning style
loop takes its gradients with torch.autograd.grad, clips them as a list and writes them into .grad
by hand before optimizer.step(); loss.backward() never runs, but every step has its gradients."""
import torch
import torch.nn.functional as F
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    params = list(model.parameters())
    for step in range(60):
        x = torch.randn(32, 8, generator=g)
        y = x[:, :2].sum(1, keepdim=True)
        loss = F.mse_loss(model(x), y)
        grads = torch.autograd.grad(loss, params)
        scale = min(1.0, 1.0 / float(torch.sqrt(sum((gr ** 2).sum() for gr in grads))))
        for p, gr in zip(params, grads):
            p.grad = gr * scale
        optimizer.step()
        optimizer.zero_grad()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
