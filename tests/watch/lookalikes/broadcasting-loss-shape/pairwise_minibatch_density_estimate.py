"""Healthy look-alike of broadcasting-loss-shape: a beta-TCVAE style VAE estimates the aggregate
posterior q(z) with the minibatch estimator, scoring every sample's code under every sample's
posterior: Normal(mu.unsqueeze(0), std.unsqueeze(0)).log_prob(z.unsqueeze(1)) is an (N, N, D) grid
on purpose, both sides given the pair axis explicitly (same rank), and logsumexp over the second
axis turns it into log q(z) per sample. The reconstruction and KL terms score each row alone."""
import math

import torch
from torch import nn
from torch.distributions import Normal
from torch.utils.data import DataLoader, TensorDataset

LATENT = 6


class VAE(nn.Module):
    def __init__(self, features=32, hidden=128):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, 2 * LATENT))
        self.decoder = nn.Sequential(nn.Linear(LATENT, hidden), nn.ReLU(), nn.Linear(hidden, features))

    def forward(self, x):
        mu, log_var = self.encoder(x).chunk(2, dim=-1)
        std = (0.5 * log_var).exp()
        z = mu + std * torch.randn_like(std)
        return self.decoder(z), z, mu, std


def tc_vae_loss(x, recon, z, mu, std, dataset_size, beta=4.0):
    n = x.shape[0]
    log_px = -nn.functional.mse_loss(recon, x, reduction="none").sum(1)
    log_qz_x = Normal(mu, std).log_prob(z).sum(1)
    log_pz = Normal(torch.zeros_like(z), torch.ones_like(z)).log_prob(z).sum(1)
    pairs = Normal(mu.unsqueeze(0), std.unsqueeze(0)).log_prob(z.unsqueeze(1))          # (N, N, D)
    log_qz = torch.logsumexp(pairs.sum(2), dim=1) - math.log(n * dataset_size)
    log_prod_qz = (torch.logsumexp(pairs, dim=1) - math.log(n * dataset_size)).sum(1)
    return -(log_px - (log_qz_x - log_qz) - beta * (log_qz - log_prod_qz) - (log_prod_qz - log_pz)).mean()


def main():
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    factors = torch.randn(2048, LATENT, generator=g)
    data = factors @ torch.randn(LATENT, 32, generator=g) + 0.1 * torch.randn(2048, 32, generator=g)
    loader = DataLoader(TensorDataset(data), batch_size=64, shuffle=True, generator=g)
    model = VAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        for (xb,) in loader:
            recon, z, mu, std = model(xb)
            loss = tc_vae_loss(xb, recon, z, mu, std, len(data))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(epoch, loss.item())


if __name__ == "__main__":
    main()
