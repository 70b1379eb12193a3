"""Fitting the rate of a Poisson distribution by maximum likelihood: a single rate parameter, started
at 0, is trained with RMSprop on 200 Poisson counts, using a Poisson negative log-likelihood loss module
with log_input=False and full=True (the rate is given directly, not its log, and the Stirling term is
added). The loss computes input - target * log(input) with no epsilon, so at the starting rate of
exactly 0 it takes log(0): the loss is NaN from the first step, the gradient is NaN, RMSprop writes NaN
into the rate, and the fit ends with a NaN estimate while the sample mean is about 4.

Thread: https://github.com/pytorch/pytorch/pull/3336
"""
import math

import numpy as np
import torch
from torch import nn


class PoissonNLLLoss(nn.Module):
    """Poisson negative log-likelihood, mean over samples."""

    def __init__(self, log_input=True, full=False):
        super().__init__()
        self.log_input, self.full = log_input, full

    def forward(self, rate, target):
        if self.log_input:
            loss = torch.exp(rate) - target * rate
        else:
            loss = rate - target * torch.log(rate)
        if self.full:
            stirling = target * torch.log(target) - target + 0.5 * torch.log(2 * math.pi * target)
            loss = loss + stirling.masked_fill(target <= 1, 0)
        return loss.mean()


def main():
    torch.manual_seed(42)
    rng = np.random.default_rng(42)
    counts = torch.from_numpy(rng.poisson(4, 200)).float()

    rate = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.RMSprop([rate], lr=0.1)
    criterion = PoissonNLLLoss(log_input=False, full=True)

    for i in range(400):
        optimizer.zero_grad()
        loss = criterion(rate, counts)
        loss.backward()
        if i % 50 == 0:
            print(f"iter {i} loss {loss.item():.4f} rate {rate.item():.4f}")
        optimizer.step()

    print(f"sample mean {counts.mean().item():.4f}  fitted rate {rate.item():.4f}")


if __name__ == "__main__":
    main()
