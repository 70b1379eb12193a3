"""A from-scratch MLP class holding its own nn.Parameter tensors, all initialised with
torch.zeros as in a textbook derivation; a regression trainer with Adam. The hidden units stay
copies of one another for the whole run (the output layer trains, the hidden layer only as one)."""
import torch
from torch import nn


class ScratchMLP(nn.Module):
    def __init__(self, d_in=6, hidden=32):
        super().__init__()
        self.W1 = nn.Parameter(torch.zeros(hidden, d_in))
        self.b1 = nn.Parameter(torch.zeros(hidden))
        self.W2 = nn.Parameter(torch.zeros(1, hidden))
        self.b2 = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        h = torch.sigmoid(x @ self.W1.t() + self.b1)
        return h @ self.W2.t() + self.b2


class Trainer:
    def __init__(self, model, lr=1e-2):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def fit(self, x, y, steps=120, batch=32):
        for step in range(steps):
            i = (step * batch) % len(x)
            loss = ((self.model(x[i:i + batch]) - y[i:i + batch]) ** 2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if step % 40 == 0:
                print(f"step {step} mse {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 6, generator=g)
    y = torch.sin(x[:, :1] * 2) + x[:, 1:2] * x[:, 2:3]
    Trainer(ScratchMLP()).fit(x, y)


if __name__ == "__main__":
    main()
