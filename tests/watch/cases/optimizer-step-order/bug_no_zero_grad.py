"""A train() helper that takes the model and optimizer as parameters and applies the update in a
function of its own; nothing ever clears .grad, so each step applies the sum of every gradient so far."""
import torch
from torch import nn


def apply_update(optimizer, clip=None, params=None):
    if clip is not None:
        torch.nn.utils.clip_grad_norm_(params, clip)
    optimizer.step()


def train(model, optimizer, batches, loss_fn):
    history = []
    for x, y in batches:
        loss = loss_fn(model(x), y)
        loss.backward()
        apply_update(optimizer)
        history.append(loss.item())
    return history


def batches(steps, batch=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(8, 1, generator=g)
    for _ in range(steps):
        x = torch.randn(batch, 8, generator=g)
        yield x, x @ w + 0.1 * torch.randn(batch, 1, generator=g)


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    history = train(model, optimizer, batches(60), nn.MSELoss())
    print(f"loss {history[0]:.3f} -> {history[-1]:.3f}")


if __name__ == "__main__":
    main()
