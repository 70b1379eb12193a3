"""Healthy look-alike of head-size-mismatch: token classification over padded sequences whose
padding positions carry the label -100, cross_entropy's default ignore_index. Those targets lie
outside 0..C-1 on purpose and are skipped by the loss; every real label is within the head."""
import torch
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(1, 50, (256, 12), generator=g)
    lengths = torch.randint(4, 13, (256,), generator=g)
    labels = tokens % 5
    labels[torch.arange(12)[None, :] >= lengths[:, None]] = -100
    model = nn.Sequential(nn.Embedding(50, 32), nn.Linear(32, 5))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(60):
        idx = torch.randint(0, 256, (32,), generator=g)
        logits = model(tokens[idx])
        loss = nn.functional.cross_entropy(logits.reshape(-1, 5), labels[idx].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
