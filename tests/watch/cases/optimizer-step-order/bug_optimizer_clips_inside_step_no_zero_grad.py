"""A fine-tuning loop in the style of older transformer example scripts: a BertAdam-like optimizer
clips each parameter's gradient inside its own step() (clip_grad_norm_ per tensor) before the Adam
update, and the loop calls loss.backward() and optimizer.step() but never zero_grad(). Every
backward() adds to the clipped gradient that step() left in .grad, so each update follows a running
sum of all past gradients rather than the current batch."""
import torch
import torch.nn.functional as F
from torch import nn


class ClippingAdam(torch.optim.Optimizer):
    """Adam that clips each parameter's gradient to max_grad_norm inside step()."""

    def __init__(self, params, lr=1e-3, max_grad_norm=1.0, betas=(0.9, 0.999), eps=1e-6):
        super().__init__(params, dict(lr=lr, max_grad_norm=max_grad_norm, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                torch.nn.utils.clip_grad_norm_(p, group["max_grad_norm"])
                state = self.state[p]
                if not state:
                    state["m"], state["v"] = torch.zeros_like(p), torch.zeros_like(p)
                state["m"].mul_(b1).add_(p.grad, alpha=1 - b1)
                state["v"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                p.sub_(group["lr"] * state["m"] / (state["v"].sqrt() + group["eps"]))


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(16, 3, generator=g)
    x = torch.randn(2048, 16, generator=g)
    y = (x @ w).argmax(1)
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 3))
    optimizer = ClippingAdam(model.parameters(), lr=2e-3)
    model.train()
    for step in range(120):
        i = (step * 32) % 2048
        loss = F.cross_entropy(model(x[i:i + 32]), y[i:i + 32])
        loss.backward()
        optimizer.step()
        if step % 40 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
