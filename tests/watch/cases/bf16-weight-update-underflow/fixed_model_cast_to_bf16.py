"""The fixed twin: float32 weights, the forward run under torch.autocast("cpu", dtype=torch.bfloat16),
so the computation is bf16 and every update lands on an fp32 weight."""
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
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pred = model(x[idx])
        loss = nn.functional.mse_loss(pred.float(), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 16, generator=g)
    y = x[:, :4].sum(1) + 0.1 * torch.randn(2048, generator=g)
    model = Regressor()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4)
    print(f"loss {train(model, optimizer, x, y, 60, g):.3f}")


if __name__ == "__main__":
    main()
