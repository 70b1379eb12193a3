"""Full-batch L-BFGS on a small regression: optimizer.step(closure) calls the closure several times
per step, and each call clears the gradients before its backward(), as torch's documentation shows.
The backward() calls happen inside step(): clearing between them is how the closure works, not
lost accumulation."""
import torch
import torch.nn.functional as F
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 6, generator=g)
    y = torch.sin(x[:, :1]) + 0.5 * x[:, 1:2]
    model = nn.Sequential(nn.Linear(6, 24), nn.Tanh(), nn.Linear(24, 1))
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5)

    def closure():
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    for step in range(30):
        loss = optimizer.step(closure)
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
