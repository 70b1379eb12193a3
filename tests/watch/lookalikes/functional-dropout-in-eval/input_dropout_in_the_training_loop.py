"""Healthy look-alike of functional-dropout-in-eval: a denoising autoencoder whose corruption is
applied by the training loop, `noisy = F.dropout(x, 0.2)` before the model is called, not inside
the model; the validation pass feeds clean inputs to the model in eval mode. F.dropout's training
argument is left at its default, but the call belongs to the training code alone."""
import torch
import torch.nn.functional as F
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    basis = torch.randn(6, 40, generator=g)
    data = torch.randn(1800, 6, generator=g) @ basis
    model = nn.Sequential(nn.Linear(40, 16), nn.ReLU(), nn.Linear(16, 40))
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(2):
        model.train()
        for i in range(0, 1536, 16):
            x = data[i:i + 16]
            noisy = F.dropout(x, 0.2)
            loss = F.mse_loss(model(noisy), x)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val = F.mse_loss(model(data[1536:]), data[1536:]).item()
        print(f"epoch {epoch} loss {loss.item():.3f} val {val:.3f}")


if __name__ == "__main__":
    main()
