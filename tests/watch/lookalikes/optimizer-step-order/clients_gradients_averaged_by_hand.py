"""Federated-style gradient averaging emulated in one process: each step, every client clears the
gradients, runs forward and backward on its own shard, and its gradients are added into a running
average; the average is then assigned to each parameter's .grad and the optimizer steps once. The
gradients are cleared before every backward() but each one is read before the next clearing: the
step applies the clients' mean, not the last client's gradient."""
import torch
import torch.nn.functional as F
from torch import nn

CLIENTS = 3


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    shards = []
    for c in range(CLIENTS):
        x = torch.randn(400, 8, generator=g) + 0.3 * c
        shards.append((x, x[:, :3].argmax(1)))
    model = nn.Sequential(nn.Linear(8, 24), nn.ReLU(), nn.Linear(24, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(60):
        mean = [torch.zeros_like(p) for p in model.parameters()]
        for x, y in shards:
            idx = torch.randint(0, len(x), (32,), generator=g)
            model.zero_grad()
            loss = F.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            for m, p in zip(mean, model.parameters()):
                m += p.grad / CLIENTS
        for m, p in zip(mean, model.parameters()):
            p.grad = m
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} last client loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
