"""Healthy look-alike of validation-backward-leak: every 5 steps the model is put in eval mode and
a saliency map (the gradient of the top score with respect to the input) is computed with
backward(), which also fills the parameters' .grad; the training step calls zero_grad() before
its own backward(), so those gradients are dropped before any step applies them."""
import torch
from torch import nn


def saliency(model, x):
    model.eval()
    x = x.clone().requires_grad_(True)
    model(x).max(1).values.sum().backward()
    model.train()
    return x.grad.abs().mean(0)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 4, (1024,), generator=g)
    x = torch.randn(1024, 16, generator=g) + nn.functional.one_hot(y, 16).float()
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 4))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(60):
        idx = torch.randint(0, 1024, (64,), generator=g)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        optimizer.step()
        if step % 5 == 4:
            top = saliency(model, x[:32]).argmax().item()
    print(f"loss {loss.item():.3f} top feature {top}")


if __name__ == "__main__":
    main()
