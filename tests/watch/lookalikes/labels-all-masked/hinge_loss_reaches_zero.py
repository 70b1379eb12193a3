"""A linear SVM trained with the hinge loss on separable data, plus an auxiliary term weighted 0.0
in this configuration: once a batch is classified with margin the hinge is exactly 0 and so is the
step's loss. A loss that reaches zero because every margin is met, or a term switched off beside a
real loss, is not a placeholder for a batch without labels."""
import torch
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w_true = torch.randn(10, generator=g)
    x = torch.randn(4096, 10, generator=g)
    y = torch.sign(x @ w_true)
    keep = (x @ w_true).abs() > 2.0           # a wide margin between the classes
    x, y = x[keep], y[keep]
    svm = nn.Linear(10, 1)
    aux_weight = 0.0
    optimizer = torch.optim.SGD(svm.parameters(), lr=0.5)
    zero_steps = 0
    for step in range(80):
        i = (step * 64) % (len(x) - 64)
        scores = svm(x[i:i + 64]).squeeze(1)
        hinge = torch.clamp(1 - y[i:i + 64] * scores, min=0).mean()
        loss = hinge + aux_weight * svm.weight.pow(2).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        zero_steps += int(loss.item() == 0.0)
    print(f"hinge {hinge.item():.4f}; {zero_steps} steps with a loss of exactly 0")


if __name__ == "__main__":
    main()
