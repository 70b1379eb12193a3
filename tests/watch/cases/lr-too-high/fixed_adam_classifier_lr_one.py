"""The same classifier and train() helper with Adam at lr=1e-3, its usual default: the weights
move by a small fraction of their size per step and the loss falls from ln(4)."""
import torch
from torch import nn


def train(model, optimizer, x, y, steps):
    losses = []
    for step in range(steps):
        idx = torch.randint(0, len(x), (64,))
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main(lr=1e-3):
    torch.manual_seed(0)
    x = torch.randn(2048, 32)
    y = (x[:, :4].sum(1) > 0).long() + 2 * (x[:, 4:8].sum(1) > 0).long()
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 4))
    losses = train(model, torch.optim.Adam(model.parameters(), lr=lr), x, y, 60)
    print(f"loss {losses[0]:.3g} -> {losses[-1]:.3g}")


if __name__ == "__main__":
    main()
