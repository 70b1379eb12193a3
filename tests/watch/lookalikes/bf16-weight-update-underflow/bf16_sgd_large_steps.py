"""Healthy look-alike of bf16-weight-update-underflow: a small bfloat16 model trained with plain SGD
at lr=0.05, whose steps are large against the weights' rounding step: the weights keep moving,
so the bf16 storage costs little here."""
import torch
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 16, generator=g)
    y = x[:, :4].sum(1)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(torch.bfloat16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(60):
        idx = torch.randint(0, 2048, (64,), generator=g)
        loss = nn.functional.mse_loss(model(x[idx].to(torch.bfloat16)).squeeze(-1).float(), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
