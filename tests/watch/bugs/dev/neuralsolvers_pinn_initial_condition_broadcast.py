"""Physics-informed network for the 2D heat equation, built like a small PINN framework
with separate loss-term objects, where the initial-condition targets come out of their
dataset as a flat vector.

The code keeps the shape of such a framework: a `LossTerm` base class that picks its norm
(`torch.nn.MSELoss` for 'L2'), `InitialCondition`, `DirichletBC` and `PDELoss` subclasses
that each get `(x, model, gt_y)` and return `weight * norm(...)`, Dataset classes that
serve the initial-state samples, boundary samples and collocation points, and a `PINN`
wrapper whose `fit(epochs, optimizer, learning_rate)` draws one batch from every dataset
per step, sums the weighted terms, backpropagates and steps Adam, printing the loss
terms and the relative L2 error against the exact solution. The bug: the initial-state
dataset returns the ground-truth temperatures with shape [batch] while the network
returns [batch, 1]. `MSELoss` only warns and broadcasts the pair into a [batch, batch]
grid, so the initial-condition term compares every prediction with every target and is
minimised by predicting the batch mean everywhere. The run finishes, the loss falls, but
the learned solution starts from a flat initial state and the error against the exact
solution stays large.

Thread: https://github.com/Photon-AI-Research/NeuralSolvers/issues/20
"""
import math

import torch
import torch.nn as nn
from torch.nn import L1Loss, MSELoss

ALPHA = 0.05
T_END = 1.0


def exact_solution(x):
    return torch.exp(-2 * math.pi ** 2 * ALPHA * x[:, 2:3]) * torch.sin(math.pi * x[:, 0:1]) * torch.sin(math.pi * x[:, 1:2])


class LossTerm:
    def __init__(self, dataset, name, norm='L2', weight=1.):
        if norm == 'L2':
            self.norm = MSELoss()
        elif norm == 'L1':
            self.norm = L1Loss()
        else:
            self.norm = norm
        self.dataset = dataset
        self.name = name
        self.weight = weight


class InitialCondition(LossTerm):
    def __call__(self, x, model, gt_y):
        prediction = model(x)
        return self.weight * self.norm(prediction, gt_y)


class DirichletBC(LossTerm):
    def __init__(self, func, dataset, name, norm='L2', weight=1.):
        super().__init__(dataset, name, norm, weight)
        self.func = func

    def __call__(self, x, model):
        prediction = model(x)
        return self.weight * self.norm(prediction, self.func(x))


class PDELoss(LossTerm):
    def __init__(self, dataset, pde, name, norm='L2', weight=1.):
        super().__init__(dataset, name, norm, weight)
        self.pde = pde

    def __call__(self, x, model):
        x = x.clone().requires_grad_(True)
        u = model(x)
        residual = self.pde(x, u)
        return self.weight * self.norm(residual, torch.zeros_like(residual))


def heat2d_residual(x, u):
    grads = torch.autograd.grad(u, x, torch.ones_like(u), create_graph=True)[0]
    u_x, u_y, u_t = grads[:, 0:1], grads[:, 1:2], grads[:, 2:3]
    u_xx = torch.autograd.grad(u_x, x, torch.ones_like(u_x), create_graph=True)[0][:, 0:1]
    u_yy = torch.autograd.grad(u_y, x, torch.ones_like(u_y), create_graph=True)[0][:, 1:2]
    return u_t - ALPHA * (u_xx + u_yy)


class InitialConditionDataset(torch.utils.data.Dataset):
    """Samples of the initial temperature field at t = 0."""

    def __init__(self, n, gen):
        xy = torch.rand(n, 2, generator=gen)
        self.x = torch.cat([xy, torch.zeros(n, 1)], dim=1)
        self.u = (torch.sin(math.pi * xy[:, 0]) * torch.sin(math.pi * xy[:, 1]))  # shape [n]

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.u[i]


class BoundaryDataset(torch.utils.data.Dataset):
    def __init__(self, n, gen):
        s = torch.rand(n, generator=gen)
        side = torch.randint(0, 4, (n,), generator=gen)
        x = torch.where(side == 0, torch.zeros(n), torch.where(side == 1, torch.ones(n), s))
        y = torch.where(side == 2, torch.zeros(n), torch.where(side == 3, torch.ones(n), s))
        y = torch.where(side < 2, torch.rand(n, generator=gen), y)
        t = torch.rand(n, generator=gen) * T_END
        self.x = torch.stack([x, y, t], dim=1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i]


class CollocationDataset(torch.utils.data.Dataset):
    def __init__(self, n, gen):
        self.x = torch.rand(n, 3, generator=gen) * torch.tensor([1.0, 1.0, T_END])

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i]


class MLP(nn.Module):
    def __init__(self, input_size=3, output_size=1, hidden_size=40, num_hidden=3):
        super().__init__()
        layers = [nn.Linear(input_size, hidden_size), nn.Tanh()]
        for _ in range(num_hidden - 1):
            layers += [nn.Linear(hidden_size, hidden_size), nn.Tanh()]
        layers.append(nn.Linear(hidden_size, output_size))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class PINN(nn.Module):
    def __init__(self, model, initial_condition, boundary_condition, pde_loss, batch_size, gen):
        super().__init__()
        self.model = model
        self.initial_condition = initial_condition
        self.boundary_condition = boundary_condition
        self.pde_loss = pde_loss
        self.loaders = {
            'ic': torch.utils.data.DataLoader(initial_condition.dataset, batch_size=batch_size, shuffle=True, generator=gen),
            'bc': torch.utils.data.DataLoader(boundary_condition.dataset, batch_size=batch_size, shuffle=True, generator=gen),
            'pde': torch.utils.data.DataLoader(pde_loss.dataset, batch_size=batch_size, shuffle=True, generator=gen),
        }

    def pinn_loss(self, batch):
        x_0, u_0 = batch['ic']
        ic = self.initial_condition(x_0, self.model, u_0)
        bc = self.boundary_condition(batch['bc'], self.model)
        pde = self.pde_loss(batch['pde'], self.model)
        return ic + bc + pde, (ic.item(), bc.item(), pde.item())

    def fit(self, epochs, optimizer='Adam', learning_rate=1e-3, x_eval=None):
        optim = torch.optim.Adam(self.model.parameters(), lr=learning_rate)
        step = 0
        for epoch in range(epochs):
            for batch in zip(*(self.loaders[k] for k in ('ic', 'bc', 'pde'))):
                batch = dict(zip(('ic', 'bc', 'pde'), batch))
                optim.zero_grad()
                loss, terms = self.pinn_loss(batch)
                loss.backward()
                optim.step()
                step += 1
            if (epoch + 1) % 10 == 0:
                with torch.no_grad():
                    u_pred, u_true = self.model(x_eval), exact_solution(x_eval)
                    rel = ((u_pred - u_true).norm() / u_true.norm()).item()
                print("epoch %3d step %4d | loss %.5f (ic %.5f bc %.5f pde %.5f) | rel L2 error %.3f" % (
                    epoch + 1, step, loss.item(), *terms, rel))


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    ic = InitialCondition(InitialConditionDataset(512, gen), name='u0', weight=1.0)
    bc = DirichletBC(lambda x: torch.zeros(len(x), 1), BoundaryDataset(512, gen), name='walls', weight=1.0)
    pde = PDELoss(CollocationDataset(512, gen), heat2d_residual, name='heat', weight=1.0)
    model = MLP()
    pinn = PINN(model, ic, bc, pde, batch_size=128, gen=gen)
    x_eval = torch.rand(2000, 3, generator=gen) * torch.tensor([1.0, 1.0, T_END])
    pinn.fit(epochs=150, learning_rate=3e-3, x_eval=x_eval)


if __name__ == "__main__":
    main()
