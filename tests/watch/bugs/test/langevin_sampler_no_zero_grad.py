"""Sampling from an unnormalized 2-D Gaussian with stochastic gradient Langevin dynamics: a small
library-style SGLD optimizer (an SGD step on the negative log density plus Gaussian noise of variance
2*lr) drives a single sample tensor x; a LangevinDynamics sampler object owns x, the optimizer and a
polynomially decaying step size, and its sample() method sets the step size, evaluates the negative
log density, calls backward and steps, then returns a copy of x. The sampler never calls zero_grad,
so x.grad accumulates the gradients of every past iteration: each Langevin step follows the running
sum of all earlier gradients instead of the current one, the chain swings around the mode with a
growing amplitude and the collected samples do not follow the target distribution.

Thread: https://github.com/alisiahkoohi/Langevin-dynamics/issues/1
"""
import copy

import numpy as np
import torch
from torch.optim.optimizer import Optimizer


class SGLD(Optimizer):
    """Stochastic gradient Langevin dynamics: x <- x - lr * grad + N(0, 2 * lr)."""

    def __init__(self, params, lr=1e-2, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                d_p = p.grad
                if group["weight_decay"]:
                    d_p = d_p + group["weight_decay"] * p
                p.add_(d_p, alpha=-group["lr"])
                p.add_(torch.randn_like(p) * (2.0 * group["lr"]) ** 0.5)


class GaussianTarget:
    def __init__(self, mu, cov):
        self.mu, self.cov = mu, cov
        self.precision = torch.linalg.inv(cov)
        self.chol = torch.linalg.cholesky(cov)

    def neg_log_density(self, x):
        d = x - self.mu
        return 0.5 * d @ self.precision @ d

    def sample(self, n):
        return torch.randn(n, self.mu.numel()) @ self.chol.T + self.mu


class LangevinDynamics:
    def __init__(self, x, energy, lr=1e-1, lr_final=4e-2, max_itr=1000):
        self.x, self.energy = x, energy
        self.optim = SGLD([self.x], lr=lr)
        gamma = -0.55
        b = max_itr / ((lr_final / lr) ** (1 / gamma) - 1.0)
        a = lr / (b ** gamma)
        self.lr_fn = lambda t: a * ((b + t) ** gamma)
        self.counter = 0

    def set_lr(self):
        for group in self.optim.param_groups:
            group["lr"] = self.lr_fn(self.counter)

    def sample(self):
        self.set_lr()
        loss = self.energy(self.x)
        loss.backward()
        self.optim.step()
        self.counter += 1
        return copy.deepcopy(self.x.detach()), loss.item()


def main():
    torch.manual_seed(19)
    np.random.seed(19)
    mu = torch.tensor([1.2, 0.6])
    cov = 0.9 * (torch.ones(2, 2) - torch.eye(2)) + 1.3 * torch.eye(2)
    target = GaussianTarget(mu, cov)

    x = torch.zeros(2, requires_grad=True)
    max_itr = 1500
    sampler = LangevinDynamics(x, target.neg_log_density, lr=1e-1, lr_final=4e-2, max_itr=max_itr)

    samples, energies = [], []
    for j in range(max_itr):
        est, energy = sampler.sample()
        energies.append(energy)
        if j % 3 == 0:
            samples.append(est.numpy())
        if j % 250 == 0:
            print(f"itr {j} energy {energy:.3f} x {est.numpy().round(3)}")
    samples = np.array(samples)[50:]
    ref = target.sample(len(samples)).numpy()
    print("chain mean", samples.mean(0).round(3), "target mean", ref.mean(0).round(3))
    print("chain cov\n", np.cov(samples.T).round(3), "\ntarget cov\n", np.cov(ref.T).round(3))


if __name__ == "__main__":
    main()
