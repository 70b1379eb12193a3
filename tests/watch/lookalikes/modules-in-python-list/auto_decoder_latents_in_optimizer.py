"""Healthy look-alike of modules-in-python-list: an auto-decoder (one latent code per training shape,
no encoder) keeps the codes as a plain tensor with requires_grad=True on its module and hands them to
the optimizer next to model.parameters(), as DeepSDF-style code does, so they train; the loss also
has an input-gradient penalty on points made to require grad each step (inputs, not attributes)."""
import torch
import torch.nn.functional as F
from torch import nn


class AutoDecoder(nn.Module):
    def __init__(self, shapes, code_dim=8, width=32):
        super().__init__()
        self.codes = (0.01 * torch.randn(shapes, code_dim)).requires_grad_()
        self.net = nn.Sequential(nn.Linear(code_dim + 2, width), nn.Softplus(), nn.Linear(width, 1))

    def forward(self, idx, points):
        code = self.codes[idx].unsqueeze(1).expand(-1, points.shape[1], -1)
        return self.net(torch.cat([code, points], dim=-1)).squeeze(-1)


def fit_step(model, optimizer, idx, points, target):
    points = points.clone().requires_grad_(True)
    pred = model(idx, points)
    (grad,) = torch.autograd.grad(pred.sum(), points, create_graph=True)
    loss = F.l1_loss(pred, target) + 0.01 * (grad.norm(dim=-1) - 1).pow(2).mean() + 1e-4 * model.codes[idx].pow(2).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    shapes = 16
    radii = 0.3 + 0.5 * torch.rand(shapes, generator=g)
    model = AutoDecoder(shapes)
    optimizer = torch.optim.Adam([{"params": model.parameters(), "lr": 3e-3}, {"params": [model.codes], "lr": 1e-2}])
    for step in range(60):
        idx = torch.randint(0, shapes, (8,), generator=g)
        points = 2 * torch.rand(8, 64, 2, generator=g) - 1
        target = points.norm(dim=-1) - radii[idx, None]
        loss = fit_step(model, optimizer, idx, points, target)
        if step % 20 == 0:
            print(f"step {step} loss {loss:.4f}")


if __name__ == "__main__":
    main()
