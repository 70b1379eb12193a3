"""A physics-informed network for a radially symmetric Poisson problem on the unit disk, trained
by a solver class: the network reads the radius r = sqrt(x**2 + y**2), and the PDE residual takes
the Laplacian of u with torch.autograd.grad(create_graph=True). The collocation grid holds the
origin, where du/dx = u'(r) * x / r is 0/0: the residual is NaN there, the loss is NaN from the
first step, and training never starts, with no error."""
import torch
from torch import nn


class RadialNet(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(1, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(),
                                  nn.Linear(width, 1))

    def forward(self, xy):
        r = torch.sqrt((xy ** 2).sum(-1, keepdim=True))
        return self.body(r)


class PoissonSolver:
    def __init__(self, model, points, lr=1e-3):
        self.model, self.points = model, points
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def laplacian(self, u, xy):
        (grad,) = torch.autograd.grad(u.sum(), xy, create_graph=True)
        lap = 0.0
        for i in range(2):
            (second,) = torch.autograd.grad(grad[:, i].sum(), xy, create_graph=True)
            lap = lap + second[:, i]
        return lap

    def residual_loss(self):
        xy = self.points.clone().requires_grad_(True)
        u = self.model(xy)
        return (self.laplacian(u, xy) + 4.0).pow(2).mean()  # u = 1 - r**2 solves lap(u) = -4

    def boundary_loss(self, n=64):
        angle = torch.linspace(0, 2 * torch.pi, n)
        edge = torch.stack([angle.cos(), angle.sin()], dim=-1)
        return self.model(edge).pow(2).mean()

    def train(self, steps):
        for _ in range(steps):
            loss = self.residual_loss() + self.boundary_loss()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()


def collocation_grid(n=21):
    axis = torch.arange(-(n // 2), n // 2 + 1) / (n // 2)  # holds 0.0 exactly
    xy = torch.stack(torch.meshgrid(axis, axis, indexing="ij"), dim=-1).reshape(-1, 2)
    return xy[(xy ** 2).sum(-1) <= 1]  # the grid inside the disk, the origin among them


def main():
    torch.manual_seed(0)
    solver = PoissonSolver(RadialNet(), collocation_grid())
    print(f"loss {solver.train(steps=60)}")


if __name__ == "__main__":
    main()
