"""Healthy look-alike of double-softmax: a classifier whose forward returns probabilities (it ends in
nn.Softmax) and whose training loss takes torch.log of them (clamped) before nll_loss. log() of a
softmax output is the log-probability, normalised once; only a second softmax, log_softmax or
logsumexp over the probabilities would be the mistake."""
import torch
import torch.nn.functional as F
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(10, 4, generator=g)
    x = torch.randn(1600, 10, generator=g)
    y = (x @ w).argmax(1)
    model = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 4), nn.Softmax(dim=1))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(3):
        for i in range(0, 1600, 32):
            probs = model(x[i:i + 32])
            loss = F.nll_loss(torch.log(probs.clamp_min(1e-8)), y[i:i + 32])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
