"""Healthy look-alike of loss-detached-from-graph: FGSM adversarial training. Each step takes the
gradient of the loss with respect to the input with torch.autograd.grad, without create_graph on
purpose (the perturbation is data, not something to differentiate through), builds
x_adv = x + eps * sign(grad), and trains on the clean and the adversarial loss, both of which
carry the model's graph."""
import torch
import torch.nn.functional as F
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    x_all = torch.randn(2048, 20, generator=g)
    y_all = (x_all[:, :5].sum(dim=1) > 0).long()
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    eps = 0.1
    for step in range(80):
        idx = torch.randint(0, len(x_all), (64,), generator=g)
        x, y = x_all[idx].clone().requires_grad_(True), y_all[idx]
        clean = F.cross_entropy(model(x), y)
        grad = torch.autograd.grad(clean, x, retain_graph=True)[0]
        x_adv = (x + eps * grad.sign()).detach()
        loss = 0.5 * clean + 0.5 * F.cross_entropy(model(x_adv), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
