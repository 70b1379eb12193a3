"""A DataLoader training loop with an evaluation after each epoch of 125 steps, to test what
kb watch does after --steps N: the epoch ends early, the evaluation runs under watch, then
the first steps of the next epoch, and the run stops. argv[1] picks the evaluation:
  clean       model.eval() and no_grad over 10 validation batches
  train-mode  the same without model.eval() (its dropout stays on): KBW012's cause
  stays-eval  model.eval() and no model.train() after it: the next epoch trains in eval mode (KBW012)
  raises      an evaluation that fails on its first batch
  long        a clean evaluation over 500 validation batches (more than the pass may take)
"""
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def evaluate(model, loader, mode):
    if mode != "train-mode":
        model.eval()
    correct = 0
    with torch.no_grad():
        for xb, yb in loader:
            if mode == "raises":
                raise RuntimeError("validation shard missing")
            correct += (model(xb).argmax(1) == yb).sum().item()
    if mode != "stays-eval":
        model.train()
    return correct


def main(mode):
    torch.manual_seed(0)
    x, y = torch.randn(2000, 20), torch.randint(0, 2, (2000,))
    val_size = 5000 if mode == "long" else 100
    xv, yv = torch.randn(val_size, 20), torch.randint(0, 2, (val_size,))
    train_loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    val_loader = DataLoader(TensorDataset(xv, yv), batch_size=10)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(2):
        steps = 0
        for xb, yb in train_loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
            steps += 1
        print(f"epoch {epoch}: {steps} steps, {evaluate(model, val_loader, mode)} correct")


if __name__ == "__main__":
    main(sys.argv[1])
