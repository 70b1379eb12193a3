"""Self-adaptive loss weights trained by min-max: a network minimizes a weighted residual loss and a
set of per-point weights maximizes it, each with its own Adam optimizer, in a Solver class with a
manual training_step(). compute_loss() backpropagates -loss for the weights and then +loss for the
network into the same .grad buffers before either optimizer steps, so every gradient sums to
exactly zero and nothing trains."""
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
        loss = (mask * self.residual(x) ** 2).mean()
        (-loss).backward(retain_graph=True)   # the weights maximize the loss
        loss.backward()                        # the network minimizes it
        return loss

    def training_step(self, x):
        self.opt_net.zero_grad()
        self.opt_weights.zero_grad()
        loss = self.compute_loss(x)
        self.opt_net.step()
        self.opt_weights.step()
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
