"""Sharpness-aware minimisation written out in the training loop: each step computes the loss and
its gradient, moves the weights to the worst point within rho along that gradient, clears the
gradients, computes the loss and gradient there, moves the weights back and lets the base SGD step
apply the second gradient. Two backward() calls per step with the gradients cleared between them is
the method: the first gradient is used (it sets the perturbation) and the weights move in between."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

RHO = 0.05


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(960, 12, generator=g)
    y = x[:, :4].argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    params = [p for p in model.parameters()]
    for epoch in range(2):
        for xb, yb in loader:
            F.cross_entropy(model(xb), yb).backward()
            with torch.no_grad():
                norm = torch.norm(torch.stack([p.grad.norm() for p in params]))
                eps = [RHO * p.grad / (norm + 1e-12) for p in params]
                for p, e in zip(params, eps):
                    p.add_(e)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            with torch.no_grad():
                for p, e in zip(params, eps):
                    p.sub_(e)
            optimizer.step()
            optimizer.zero_grad()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
