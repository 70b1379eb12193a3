"""Healthy look-alike of frozen-params-in-optimizer: the encoder is frozen after a warm-up while
the AdamW optimizer still lists it, but gradients are cleared with the default
zero_grad(set_to_none=True): the frozen tensors have .grad None, which every torch optimizer
skips, so their values stay exactly as they were."""
import torch
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 4, (1024,), generator=g)
    x = torch.randn(1024, 16, generator=g) + nn.functional.one_hot(y, 16).float()
    encoder = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
    model = nn.Sequential(encoder, nn.Linear(32, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    for step in range(60):
        if step == 5:
            encoder.requires_grad_(False)
        idx = torch.randint(0, 1024, (64,), generator=g)
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
