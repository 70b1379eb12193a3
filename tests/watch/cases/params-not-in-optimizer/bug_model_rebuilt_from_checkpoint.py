"""Resuming through helper functions: setup() builds the model and its optimizer, then
load_checkpoint() builds a fresh model and loads the saved weights into it, and training goes on
with that new model; the optimizer still holds the first model's parameters, so no trained
parameter ever changes."""
import io

import torch
from torch import nn


def build_model():
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))


def setup(lr=1e-3):
    model = build_model()
    return model, torch.optim.Adam(model.parameters(), lr=lr)


def load_checkpoint(model, buffer):
    buffer.seek(0)
    restored = build_model()
    restored.load_state_dict(torch.load(buffer))
    return restored


def train(model, optimizer, x, y, steps):
    for step in range(steps):
        i = (step * 32) % len(x)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x[i:i + 32]), y[i:i + 32])
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=g)
    y = (x[:, :4] ** 2).argmax(1)
    model, optimizer = setup()
    checkpoint = io.BytesIO()
    torch.save(model.state_dict(), checkpoint)
    model = load_checkpoint(model, checkpoint)
    print(f"loss {train(model, optimizer, x, y, steps=60):.3f}")


if __name__ == "__main__":
    main()
