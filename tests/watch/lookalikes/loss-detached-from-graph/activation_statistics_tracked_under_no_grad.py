"""A vector-quantised bottleneck with an exponential-moving-average codebook, in the style of
VQ-VAE-2: forward() finds the nearest code with grad enabled, then, inside `with torch.no_grad():`,
updates the cluster sizes and code sums from the encoder's output (buffers, new local names; the
graph-carrying input is read, never rebound, and no network is called on it), and returns the
straight-through quantised vectors. The encoder trains through the commitment loss and the
decoder's reconstruction loss, as intended."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CODES, DIM = 16, 8


class EMAQuantizer(nn.Module):
    def __init__(self, decay=0.9):
        super().__init__()
        self.decay = decay
        embed = torch.randn(CODES, DIM)
        self.register_buffer("embed", embed)
        self.register_buffer("cluster_size", torch.ones(CODES))
        self.register_buffer("embed_sum", embed.clone())

    def forward(self, z):
        flat = z.reshape(-1, DIM)
        index = torch.cdist(flat, self.embed).argmin(1)
        quantized = self.embed[index].view_as(z)
        if self.training:
            with torch.no_grad():
                onehot = F.one_hot(index, CODES).type(flat.dtype)
                self.cluster_size.mul_(self.decay).add_(onehot.sum(0), alpha=1 - self.decay)
                self.embed_sum.mul_(self.decay).add_(onehot.t() @ flat, alpha=1 - self.decay)
                self.embed.copy_(self.embed_sum / self.cluster_size.clamp(min=1e-5).unsqueeze(1))
        commitment = F.mse_loss(z, quantized.detach())
        return z + (quantized - z).detach(), commitment


class VQAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, DIM))
        self.quantizer = EMAQuantizer()
        self.decoder = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 32))

    def forward(self, x):
        q, commitment = self.quantizer(self.encoder(x))
        return self.decoder(q), commitment


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(800, 32, generator=g)
    loader = DataLoader(TensorDataset(x), batch_size=32, shuffle=True, generator=g)
    model = VQAutoencoder()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        for (xb,) in loader:
            recon, commitment = model(xb)
            loss = F.mse_loss(recon, xb) + 0.25 * commitment
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
