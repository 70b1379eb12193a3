"""Adapting a reloaded checkpoint to a shifted input population: a fresh model loads the trained
weights, its BatchNorm running statistics are reset and re-estimated by forward passes under
torch.no_grad() in the training mode the model was built in (no backward), and only then is the
model put in eval mode and evaluated. The grad-free training-mode passes are deliberate."""
import torch
import torch.nn.functional as F
from torch import nn


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 48), nn.BatchNorm1d(48), nn.ReLU(), nn.Linear(48, 48),
                                 nn.BatchNorm1d(48), nn.ReLU(), nn.Linear(48, 2))

    def forward(self, x):
        return self.net(x)


def batches(n, shift, g, size=64):
    for _ in range(n):
        x = torch.randn(size, 10, generator=g) + shift
        yield x, ((x - shift)[:, 0] > 0).long()


def reestimate_statistics(model, stream):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm1d):
            m.reset_running_stats()
    with torch.no_grad():
        for x, _ in stream:
            model(x)


def accuracy(model, stream):
    model.eval()
    hits = total = 0
    with torch.no_grad():
        for x, y in stream:
            hits += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    return hits / total


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    source = Tower()
    optimizer = torch.optim.SGD(source.parameters(), lr=0.05, momentum=0.9)
    source.train()
    for x, y in batches(40, 0.0, g):
        optimizer.zero_grad()
        F.cross_entropy(source(x), y).backward()
        optimizer.step()
    adapted = Tower()
    adapted.load_state_dict(source.state_dict())
    reestimate_statistics(adapted, batches(30, 1.5, g))
    print(f"accuracy on the shifted population {accuracy(adapted, batches(8, 1.5, g)):.3f}")


if __name__ == "__main__":
    main()
