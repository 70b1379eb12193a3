"""A clean training loop that writes argv[1] in a finally block: kb watch --steps N must stop it
in a way that lets the finally block run. argv[2], when given, is the exit status to end with."""
import sys

import torch
from torch import nn


def main(marker, status):
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(64, 4), torch.randint(0, 2, (64,))
    steps = 0
    try:
        for _ in range(200):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            steps += 1
    finally:
        with open(marker, "w") as fh:
            fh.write(f"finally ran after {steps} steps\n")
    print(f"trained {steps} steps")
    if status:
        sys.exit(status)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0)
