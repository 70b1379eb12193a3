"""The same min-max solver with each side zeroed, backpropagated and stepped in turn: the weights
step on -loss, then the network steps on +loss, so neither gradient cancels the other."""
import torch
from torch import nn


class Solver:
    def __init__(self, points):
        self.net = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
        self.weights = nn.Parameter(torch.zeros(points, 1))
        self.opt_net = torch.optim.Adam(self.net.parameters(), lr=1e-3)
        self.opt_weights = torch.optim.Adam([self.weights], lr=1e-2)

    def residual(self, x):
        return self.net(x) - torch.sin(3 * x)

    def compute_loss(self, x):
        mask = torch.sigmoid(self.weights)
        return (mask * self.residual(x) ** 2).mean()

    def training_step(self, x):
        self.opt_weights.zero_grad()
        (-self.compute_loss(x)).backward()     # the weights maximize the loss
        self.opt_weights.step()
        self.opt_net.zero_grad()
        loss = self.compute_loss(x)
        loss.backward()                        # the network minimizes it
        self.opt_net.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    x = torch.linspace(-1, 1, 128).unsqueeze(1)
    solver = Solver(len(x))
    for epoch in range(80):
        loss = solver.training_step(x)
    print(f"loss {loss:.4f}")


if __name__ == "__main__":
    main()
