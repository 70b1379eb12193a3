"""Healthy look-alike of clip-threshold-too-small: a small transformer-style classifier trained with
AdamW and clip_grad_norm_(max_norm=0.05), which clips every step. AdamW divides each coordinate
by its running RMS, so rescaling the whole gradient changes its step very little: the run trains
as it does without the clip, which the entry says is not this mistake."""
import torch
import torch.nn.functional as F
from torch import nn


def main():
    torch.manual_seed(0)
    x = torch.randn(1024, 16)
    y = (x[:, :4].sum(dim=1) > 0).long()
    model = nn.Sequential(nn.Linear(16, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    for step in range(120):
        idx = torch.randint(0, 1024, (64,))
        loss = F.cross_entropy(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.05)
        optimizer.step()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
