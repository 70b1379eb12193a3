"""A training script that fails with the user's own error after two steps."""
import torch
from torch import nn


def load_batch(step):
    if step == 2:
        raise ValueError("corrupt shard 7")
    return torch.randn(16, 4), torch.randint(0, 2, (16,))


def main():
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(10):
        x, y = load_batch(step)
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()


if __name__ == "__main__":
    main()
