"""The fixed twin: validation runs under torch.no_grad() and never calls backward()."""
import torch
from torch import nn


def run_batch(model, x, y, train=True):
    loss = nn.functional.cross_entropy(model(x), y)
    if train:
        loss.backward()
    return loss.item()


def evaluate(model, x, y):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(x), 128):
            total += run_batch(model, x[i:i + 128], y[i:i + 128], train=False)
    model.train()
    return total


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 4, (1536,), generator=g)
    x = torch.randn(1536, 16, generator=g) + nn.functional.one_hot(y, 16).float()
    xt, yt, xv, yv = x[:1024], y[:1024], x[1024:], y[1024:]
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(60):
        idx = torch.randint(0, 1024, (64,), generator=g)
        run_batch(model, xt[idx], yt[idx])
        optimizer.step()
        optimizer.zero_grad()
        if step % 5 == 4:
            val = evaluate(model, xv, yv)
    print(f"val {val:.3f}")


if __name__ == "__main__":
    main()
