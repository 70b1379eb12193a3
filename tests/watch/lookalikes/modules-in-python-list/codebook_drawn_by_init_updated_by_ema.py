"""Healthy look-alike of modules-in-python-list: a vector-quantised autoencoder keeps its codebook as
a plain tensor drawn by nn.init.uniform_ (not a Parameter, not in the optimizer) on purpose: the
codebook is moved by an exponential moving average of the encodings assigned to each code, written in
place under no_grad every training step, so its values change; the encoder and decoder train
through a straight-through estimator with a commitment loss."""
import torch
import torch.nn.functional as F
from torch import nn


class EMAQuantizer(nn.Module):
    def __init__(self, codes=16, dim=8, decay=0.9):
        super().__init__()
        self.decay = decay
        self.codebook = torch.empty(codes, dim)
        nn.init.uniform_(self.codebook, -1.0, 1.0)

    def forward(self, z):
        index = torch.cdist(z, self.codebook).argmin(1)
        quantized = self.codebook[index]
        if self.training:
            with torch.no_grad():
                onehot = F.one_hot(index, len(self.codebook)).float()
                counts = onehot.sum(0)
                means = (onehot.t() @ z) / counts.clamp(min=1)[:, None]
                used = counts > 0
                self.codebook[used] = self.decay * self.codebook[used] + (1 - self.decay) * means[used]
        commitment = F.mse_loss(z, quantized.detach())
        return z + (quantized - z).detach(), commitment


class VQAutoencoder(nn.Module):
    def __init__(self, d=12, dim=8):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, dim))
        self.quantizer = EMAQuantizer(dim=dim)
        self.decoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, d))

    def forward(self, x):
        q, commitment = self.quantizer(self.encoder(x))
        return self.decoder(q), commitment


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    centres = torch.randn(10, 12, generator=g)
    model = VQAutoencoder()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    model.train()
    for step in range(60):
        x = centres[torch.randint(0, 10, (64,), generator=g)] + 0.1 * torch.randn(64, 12, generator=g)
        recon, commitment = model(x)
        loss = F.mse_loss(recon, x) + 0.25 * commitment
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
