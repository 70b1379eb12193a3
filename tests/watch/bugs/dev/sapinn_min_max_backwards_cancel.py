"""A self-adaptive PINN solver for a 1D Poisson problem (interior residual plus two boundary conditions,
all written as equations), in the style of a Lightning module with manual optimization: one Adam
optimizer for the network, one for the per-point self-adaptive weights (sigmoid masks). The weights
are meant to do gradient ascent on the weighted residual loss and the network gradient descent.
training_step() zeroes both optimizers, calls the parent training_step() that loops over the
conditions, and steps both optimizers. Inside loss_phys() the solver backpropagates -loss (for the
weights), recomputes the same loss on detached samples and backpropagates +loss (for the network)
with no step or zero_grad in between, so the two gradients are summed in the same .grad buffers and
cancel: neither the weights nor the network ever move, and the solution error stays at its
initial value.

Thread: https://github.com/PINA-org/PINA/pull/469
"""
import math

import torch
from torch import nn


class Weights(nn.Module):
    def __init__(self, n_points, g):
        super().__init__()
        self.sa_weights = nn.Parameter(torch.rand(n_points, 1, generator=g))

    def forward(self):
        return torch.sigmoid(self.sa_weights)


def laplace_residual(u, x):
    du = torch.autograd.grad(u, x, torch.ones_like(u), create_graph=True)[0]
    d2u = torch.autograd.grad(du, x, torch.ones_like(du), create_graph=True)[0]
    return d2u + math.pi ** 2 * torch.sin(math.pi * x)


def fixed_zero(u, x):
    return u


class PINNInterface:
    """Loops over the conditions and sums the per-condition losses."""

    def training_step(self, batch):
        total = 0.0
        for name, (samples, equation) in batch.items():
            self.current_condition_name = name
            total = total + self.loss_phys(samples, equation)
        return total

    def manual_backward(self, loss):
        loss.backward()


class SelfAdaptivePINN(PINNInterface):
    def __init__(self, model, conditions, g):
        self.model = model
        self.weights_dict = nn.ModuleDict({k: Weights(v[0].shape[0], g) for k, v in conditions.items()})
        self.optimizer_model = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.optimizer_weights = torch.optim.Adam(self.weights_dict.parameters(), lr=1e-3)
        self.automatic_optimization = False

    def compute_residual(self, samples, equation):
        return equation(self.model(samples), samples)

    def _loss_phys(self, samples, equation):
        residual = self.compute_residual(samples, equation)
        weights = self.weights_dict[self.current_condition_name]()
        return torch.mean(weights * residual ** 2)

    def loss_phys(self, samples, equation):
        # ascent step for the self-adaptive weights
        self.manual_backward(-self._loss_phys(samples, equation))
        # descent step for the network, on a fresh graph
        samples = samples.detach().requires_grad_()
        loss_value = self._loss_phys(samples, equation)
        self.manual_backward(loss_value)
        return loss_value

    def training_step(self, batch):
        self.optimizer_model.zero_grad()
        self.optimizer_weights.zero_grad()
        loss = super().training_step(batch)
        self.optimizer_model.step()
        self.optimizer_weights.step()
        return loss


class Trainer:
    def __init__(self, solver, max_epochs):
        self.solver, self.max_epochs = solver, max_epochs

    def train(self, batch, x_test):
        for epoch in range(self.max_epochs):
            loss = self.solver.training_step(batch)
            if epoch % 20 == 0 or epoch == self.max_epochs - 1:
                with torch.no_grad():
                    err = (self.solver.model(x_test) - torch.sin(math.pi * x_test)).pow(2).mean().sqrt()
                print(f"epoch {epoch} loss {loss.item():.5f} l2_err {err.item():.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    interior = torch.rand(128, 1, generator=g).requires_grad_()
    conditions = {
        "D": (interior, laplace_residual),
        "g1": (torch.zeros(1, 1, requires_grad=True), fixed_zero),
        "g2": (torch.ones(1, 1, requires_grad=True), fixed_zero),
    }
    model = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
    solver = SelfAdaptivePINN(model, conditions, g)
    Trainer(solver, max_epochs=120).train(conditions, torch.linspace(0, 1, 101)[:, None])


if __name__ == "__main__":
    main()
