"""A regression model trained by a train() helper that receives the model and the optimizer and
calls a clip_and_step() function of its own. The helper clips to max_norm=1e-3 by default, a value
meant for per-parameter clipping; with SGD every step is clipped to a fraction of a percent of the
gradient, and the fit stalls far above what the same loop reaches without clipping."""
import torch
from torch import nn


def clip_and_step(model, optimizer, max_norm=1e-3):
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()


def train(model, optimizer, x, y, steps):
    criterion = nn.MSELoss()
    for step in range(steps):
        idx = torch.randint(0, x.shape[0], (64,))
        loss = criterion(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        clip_and_step(model, optimizer)
    return loss.item()


def main():
    torch.manual_seed(0)
    x = torch.randn(2048, 8)
    y = x @ torch.randn(8, 1) * 3 + 0.1 * torch.randn(2048, 1)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    print(f"final loss {train(model, optimizer, x, y, 200):.4f}")


if __name__ == "__main__":
    main()
