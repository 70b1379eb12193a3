"""The multi-task helpers with the per-task errors gathered by torch.stack(errors): the weighted task
terms keep their graph and train the heads and the shared trunk."""
import torch
from torch import nn


def build_model(dim=16, tasks=3):
    trunk = nn.Sequential(nn.Linear(dim, 48), nn.ReLU(), nn.Linear(48, 48), nn.ReLU())
    heads = nn.ModuleList(nn.Linear(48, 1) for _ in range(tasks))
    return trunk, heads


def task_errors(trunk, heads, x, ys):
    h = trunk(x)
    return [(head(h).squeeze(1) - y).abs().mean() for head, y in zip(heads, ys)]


def weighted_total(errors, weights, trunk, decay=1e-4):
    penalty = sum(p.pow(2).sum() for p in trunk.parameters())
    return (torch.stack(errors) * weights).sum() + decay * penalty


def make_data(n=768, dim=16, tasks=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g)
    w = torch.randn(tasks, dim, generator=g)
    return x, [torch.tanh(x @ w[t]) for t in range(tasks)]


def main():
    torch.manual_seed(0)
    x, ys = make_data()
    trunk, heads = build_model()
    params = [*trunk.parameters(), *heads.parameters()]
    optimizer = torch.optim.SGD(params, lr=0.05, momentum=0.9)
    weights = torch.tensor([1.0, 0.5, 0.5])
    for epoch in range(4):
        for i in range(0, len(x), 48):
            errors = task_errors(trunk, heads, x[i:i + 48], [y[i:i + 48] for y in ys])
            loss = weighted_total(errors, weights, trunk)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
