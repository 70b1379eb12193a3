"""A trainer that casts the whole model to bfloat16 with model.to(torch.bfloat16) to halve memory
and trains it with AdamW at lr=2e-4 and no fp32 master weights: each update is far below the
rounding step of weights of order 0.1-1 (about 0.3% of them), so most weights round back to the
value they had and the loss barely moves."""
import torch
from torch import nn


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


def train(model, optimizer, x, y, steps, g):
    for step in range(steps):
        idx = torch.randint(0, len(x), (64,), generator=g)
        loss = nn.functional.mse_loss(model(x[idx]).float(), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 16, generator=g)
    y = x[:, :4].sum(1) + 0.1 * torch.randn(2048, generator=g)
    model = Regressor().to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4)
    print(f"loss {train(model, optimizer, x.to(torch.bfloat16), y, 60, g):.3f}")


if __name__ == "__main__":
    main()
