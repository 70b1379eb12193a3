"""Healthy: a twelve-block residual MLP without normalisation, default init. Each block adds its
output to the stream, so the stream's scale creeps up with depth, but every Linear layer alone
has a gain below 1: no run of layers multiplies the signal."""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


def main():
    torch.manual_seed(0)
    d = 64
    model = nn.Sequential(nn.Linear(16, d), *[Block(d) for _ in range(12)], nn.Linear(d, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    x = torch.randn(1024, 16)
    y = torch.sin(x[:, :4]).sum(1, keepdim=True)
    for _ in range(60):
        idx = torch.randint(0, 1024, (128,))
        loss = nn.functional.mse_loss(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"mse {loss.item():.4f}")


if __name__ == "__main__":
    main()
