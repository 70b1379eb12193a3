"""A stochastic binary autoencoder: forward() samples each binary code unit from its own sigmoid
probability by comparing uniform draws with it, `(torch.rand_like(p) < p).float()`, and passes the
gradient straight through. The validation pass runs in eval mode under no_grad and samples the
codes the same way on purpose: the threshold is a tensor of per-unit probabilities, so this is
sampling a stochastic layer, not a dropout left on."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class BinaryAutoencoder(nn.Module):
    def __init__(self, dim=32, code=16):
        super().__init__()
        self.enc = nn.Linear(dim, code)
        self.dec = nn.Linear(code, dim)

    def forward(self, x):
        p = torch.sigmoid(self.enc(x))
        sample = (torch.rand_like(p) < p).float()
        h = p + (sample - p).detach()
        return self.dec(h)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(700, 32, generator=g)
    train = DataLoader(TensorDataset(x[:600]), batch_size=32, shuffle=True, generator=g)
    val = DataLoader(TensorDataset(x[600:]), batch_size=50)
    model = BinaryAutoencoder()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(3):
        model.train()
        for (xb,) in train:
            loss = F.mse_loss(model(xb), xb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val_loss = sum(F.mse_loss(model(xb), xb, reduction="sum").item() for (xb,) in val) / len(val.dataset)
        print(f"epoch {epoch} val loss {val_loss:.4f}")


if __name__ == "__main__":
    main()
