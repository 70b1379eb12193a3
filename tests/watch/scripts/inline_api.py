"""The one-line use: watch(model, optimizer) inside the script; the report is printed at exit."""
import sys

import torch
from torch import nn

from kb_tools.watch import watch


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
    optimizer = torch.optim.Adam(model[0].parameters(), lr=1e-2)  # the last layer is left out
    watch(model, optimizer, report=sys.argv[1] if len(sys.argv) > 1 else None)
    x, y = torch.randn(48, 6), torch.randint(0, 3, (48,))
    for _ in range(20):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    print("training done")


if __name__ == "__main__":
    main()
