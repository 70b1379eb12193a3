"""LoRA-style adapters on a frozen linear backbone: each adapter's B matrix starts at zero, so its
first updates are large next to its own (tiny) size, while the loss falls from the start. Large
relative updates of a freshly grown matrix, with no rising loss, are not a step size that is too
large."""
import torch
from torch import nn


class LoRALinear(nn.Module):
    def __init__(self, base, rank=4):
        super().__init__()
        self.base = base
        self.base.weight.requires_grad_(False)
        self.base.bias.requires_grad_(False)
        self.a = nn.Parameter(torch.randn(rank, base.in_features) / base.in_features ** 0.5)
        self.b = nn.Parameter(torch.zeros(base.out_features, rank))

    def forward(self, x):
        return self.base(x) + x @ self.a.t() @ self.b.t()


def main():
    torch.manual_seed(0)
    x = torch.randn(2048, 32)
    y = (x[:, :4].sum(1) > 0).long() + 2 * (x[:, 4:8].sum(1) > 0).long()
    model = nn.Sequential(LoRALinear(nn.Linear(32, 64)), nn.ReLU(), LoRALinear(nn.Linear(64, 4)))
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=1e-2)
    for step in range(60):
        idx = torch.randint(0, len(x), (64,))
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
