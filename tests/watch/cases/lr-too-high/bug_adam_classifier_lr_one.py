"""A four-class MLP classifier trained through a train() helper with Adam at lr=1.0 (a value
copied from an SGD recipe): Adam moves every weight by about lr per step, many times the size of
the weights themselves, so the loss jumps from ln(4) to the thousands after the first step and
stays far above what the model reaches at lr=1e-3."""
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


def main(lr=1.0):
    torch.manual_seed(0)
    x = torch.randn(2048, 32)
    y = (x[:, :4].sum(1) > 0).long() + 2 * (x[:, 4:8].sum(1) > 0).long()
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 4))
    losses = train(model, torch.optim.Adam(model.parameters(), lr=lr), x, y, 60)
    print(f"loss {losses[0]:.3g} -> {losses[-1]:.3g}")


if __name__ == "__main__":
    main()
