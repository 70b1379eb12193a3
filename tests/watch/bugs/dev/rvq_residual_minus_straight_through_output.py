"""A small image autoencoder with a residual vector quantizer: a conv encoder turns each 1x16x16
image into 16 feature vectors, a ResidualVQ module runs them through a stack of VectorQuantize
layers (EMA-updated codebooks, a per-layer commitment loss) and returns (quantized, indices,
commit_losses); a conv decoder rebuilds the image. A train(model, optimizer, loader, epochs) helper
adds the reconstruction MSE and the summed commitment losses, then zero_grad / backward / step.
Each VectorQuantize returns the straight-through output x + (q - x).detach(), and the ResidualVQ loop
computes the next residual as residual - quantized with that straight-through tensor, not with
quantized.detach(). The residual handed to every quantizer after the first is then constant with
respect to the encoder (its gradient is I - I = 0), so the commitment losses of quantizers 2..N send
no gradient to the encoder and the encoder only ever commits to the first codebook.

Thread: https://github.com/lucidrains/vector-quantize-pytorch/issues/33
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class VectorQuantize(nn.Module):
    def __init__(self, dim, codebook_size, decay=0.9, commitment_weight=1.0, eps=1e-5):
        super().__init__()
        self.decay, self.eps, self.commitment_weight = decay, eps, commitment_weight
        embed = torch.randn(codebook_size, dim) * 0.5
        self.register_buffer("embed", embed)
        self.register_buffer("cluster_size", torch.ones(codebook_size))
        self.register_buffer("embed_avg", embed.clone())

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        dist = torch.cdist(flat, self.embed)
        ind = dist.argmin(dim=-1)
        q = self.embed[ind].view_as(x)
        if self.training:
            with torch.no_grad():
                onehot = F.one_hot(ind, self.embed.shape[0]).type(flat.dtype)
                self.cluster_size.mul_(self.decay).add_(onehot.sum(0), alpha=1 - self.decay)
                self.embed_avg.mul_(self.decay).add_(onehot.t() @ flat, alpha=1 - self.decay)
                n = self.cluster_size.sum()
                size = (self.cluster_size + self.eps) / (n + self.embed.shape[0] * self.eps) * n
                self.embed.copy_(self.embed_avg / size.unsqueeze(1))
        commit = F.mse_loss(q.detach(), x) * self.commitment_weight
        q = x + (q - x).detach()          # straight-through estimator
        return q, ind.view(x.shape[:-1]), commit


class ResidualVQ(nn.Module):
    def __init__(self, dim, num_quantizers, codebook_size):
        super().__init__()
        self.layers = nn.ModuleList([VectorQuantize(dim, codebook_size) for _ in range(num_quantizers)])

    def forward(self, x):
        quantized_out, residual = 0.0, x
        all_indices, all_losses = [], []
        for layer in self.layers:
            quantized, indices, loss = layer(residual)
            residual = residual - quantized
            quantized_out = quantized_out + quantized
            all_indices.append(indices)
            all_losses.append(loss)
        return quantized_out, torch.stack(all_indices, -1), torch.stack(all_losses)


class RVQAutoencoder(nn.Module):
    def __init__(self, dim=16, num_quantizers=4, codebook_size=32):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, 32, 4, 2, 1), nn.ReLU(), nn.Conv2d(32, dim, 4, 2, 1))
        self.rvq = ResidualVQ(dim, num_quantizers, codebook_size)
        self.decoder = nn.Sequential(nn.ConvTranspose2d(dim, 32, 4, 2, 1), nn.ReLU(),
                                     nn.ConvTranspose2d(32, 1, 4, 2, 1))

    def forward(self, img):
        z = self.encoder(img)                                   # (B, dim, 4, 4)
        seq = z.flatten(2).transpose(1, 2)                      # (B, 16, dim)
        q, indices, commit_losses = self.rvq(seq)
        q = q.transpose(1, 2).reshape_as(z)
        return self.decoder(q), indices, commit_losses


def train(model, optimizer, loader, epochs):
    step = 0
    for epoch in range(epochs):
        model.train()
        for (img,) in loader:
            recon, indices, commit_losses = model(img)
            rec = F.mse_loss(recon, img)
            loss = rec + commit_losses.sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 20 == 0:
                print(f"step {step}: recon {rec.item():.4f} commit per quantizer "
                      f"{[round(v, 4) for v in commit_losses.tolist()]}")
            step += 1


def make_images(n, seed):
    g = torch.Generator().manual_seed(seed)
    c = torch.arange(16).float()
    cy, cx = torch.rand(n, 1, 1, generator=g) * 10 + 3, torch.rand(n, 1, 1, generator=g) * 10 + 3
    r = torch.rand(n, 1, 1, generator=g) * 2 + 1.5
    img = torch.exp(-((c.view(1, 16, 1) - cy) ** 2 + (c.view(1, 1, 16) - cx) ** 2) / (2 * r ** 2))
    return img.unsqueeze(1)


if __name__ == "__main__":
    torch.manual_seed(0)
    data = make_images(1024, 0)
    loader = DataLoader(TensorDataset(data), batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    model = RVQAutoencoder()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    train(model, optimizer, loader, epochs=3)
