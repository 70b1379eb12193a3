"""The fixed twin: float32 weights and the forward under torch.autocast("cpu", dtype=torch.bfloat16),
which has float32's range, so the same pre-activations stay finite."""
import torch
from torch import nn


def make_batch(g, n=64):
    x = torch.rand(n, 32, generator=g) * 20000 + 20000
    y = x[:, :4].mean(1) / 10000
    return x, y


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    with torch.no_grad():
        model[0].weight.abs_()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, eps=1e-4)
    for step in range(30):
        x, y = make_batch(g)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pred = model(x).squeeze(-1).float()
        loss = nn.functional.mse_loss(pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
