"""An evaluate() helper puts the model in eval mode, and the training loop never switches it back:
after the first evaluation, dropout is off and BatchNorm's statistics are frozen."""
import torch
import torch.nn.functional as F
from torch import nn


def make_model():
    return nn.Sequential(nn.Linear(10, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 2))


def evaluate(model, x, y):
    model.eval()
    with torch.no_grad():
        return F.cross_entropy(model(x), y).item()


def train(model, optimizer, x, y, steps, eval_every):
    model.train()
    for step in range(steps):
        i = (step * 32) % len(x)
        loss = F.cross_entropy(model(x[i:i + 32]), y[i:i + 32])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (step + 1) % eval_every == 0:
            val = evaluate(model, x[:64], y[:64])
    return val


def main():
    torch.manual_seed(0)
    x = torch.randn(320, 10)
    y = (x.sum(1) > 0).long()
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    print(f"val loss {train(model, optimizer, x, y, steps=60, eval_every=10):.3f}")


if __name__ == "__main__":
    main()
