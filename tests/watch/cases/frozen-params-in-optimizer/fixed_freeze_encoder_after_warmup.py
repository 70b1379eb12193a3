"""The fixed twin: when the encoder is frozen, the optimizer is rebuilt over the trainable
parameters only, so nothing steps the frozen weights."""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(self.encoder(x))


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 4, (1024,), generator=g)
    x = torch.randn(1024, 16, generator=g) + nn.functional.one_hot(y, 16).float()
    model = Model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    for step in range(60):
        if step == 5:
            model.encoder.requires_grad_(False)
            optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3,
                                          weight_decay=0.05)
        idx = torch.randint(0, 1024, (64,), generator=g)
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
