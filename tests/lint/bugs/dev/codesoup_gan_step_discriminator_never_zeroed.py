"""
Shape: Generator and Discriminator nn.Modules each own self.optimizer (Adam built in __init__); a GAN wrapper class holds both plus BCELoss and its step(data) method does the DCGAN-tutorial sequence: D on x_real (backward), D on detached x_fake (backward), disc.optimizer.step(), then gen.zero_grad(), G loss through D, backward, gen.optimizer.step(); a fit loop calls gan.step(batch) per batch.
Bug: the discriminator's gradients are never zeroed (no disc.zero_grad() / disc.optimizer.zero_grad()), so they accumulate across steps, including the gradients left by the generator's backward pass.
Thread: https://github.com/Adversarial-Deep-Learning/code-soup/issues/69
"""
from typing import Tuple

import torch
import torch.nn as nn
import torch.optim as optim


class Generator(nn.Module):
    def __init__(self, side: int, n_ch: int, z_dim: int, lr: float):
        super().__init__()
        self.side = side
        self.n_ch = n_ch
        self.z_dim = z_dim
        self.net = nn.Sequential(
            nn.Linear(z_dim, 256), nn.LeakyReLU(0.2),
            nn.Linear(256, 512), nn.LeakyReLU(0.2),
            nn.Linear(512, 1024), nn.LeakyReLU(0.2),
            nn.Linear(1024, side * side * n_ch), nn.Tanh(),
        )
        self.optimizer = optim.Adam(params=self.parameters(), lr=lr)

    def forward(self, x):
        return self.net(x).view(-1, self.n_ch, self.side, self.side)


class Discriminator(nn.Module):
    def __init__(self, side: int, n_ch: int, lr: float):
        super().__init__()
        self.in_feats = side * side * n_ch
        self.net = nn.Sequential(
            nn.Linear(self.in_feats, 1024), nn.LeakyReLU(0.2), nn.Dropout(0.3),
            nn.Linear(1024, 512), nn.LeakyReLU(0.2), nn.Dropout(0.3),
            nn.Linear(512, 256), nn.LeakyReLU(0.2), nn.Dropout(0.3),
            nn.Linear(256, 1), nn.Sigmoid(),
        )
        self.optimizer = optim.Adam(params=self.parameters(), lr=lr)

    def forward(self, x):
        return self.net(x.view(-1, self.in_feats))


class GAN:
    def __init__(self, side: int, n_ch: int, z_dim: int, device: torch.device, lr: float):
        self.z_dim = z_dim
        self.device = device
        self.gen = Generator(side, n_ch, z_dim, lr).to(device)
        self.disc = Discriminator(side, n_ch, lr).to(device)
        self.bce = nn.BCELoss()
        self.REAL = 1.0
        self.FAKE = 0.0

    def step(self, data) -> Tuple:
        x_real, _ = data
        x_real = x_real.to(self.device)
        n = x_real.shape[0]
        tgt = torch.full((n,), self.REAL, dtype=torch.float, device=self.device)

        out = self.disc(x_real).view(-1)
        err_real = self.bce(out, tgt)
        err_real.backward()
        d_x = out.mean().item()

        z = torch.randn(n, self.z_dim, device=self.device)
        x_fake = self.gen(z)
        tgt.fill_(self.FAKE)
        out = self.disc(x_fake.detach()).view(-1)
        err_fake = self.bce(out, tgt)
        err_fake.backward()
        d_g_z1 = out.mean().item()
        err_d = err_real + err_fake
        self.disc.optimizer.step()

        self.gen.zero_grad()
        tgt.fill_(self.REAL)
        out = self.disc(x_fake).view(-1)
        err_g = self.bce(out, tgt)
        err_g.backward()
        d_g_z2 = out.mean().item()
        self.gen.optimizer.step()
        return d_x, d_g_z1, err_d, d_g_z2


def fit(gan, loader, epochs):
    for epoch in range(epochs):
        for i, batch in enumerate(loader):
            d_x, d_g_z1, err_d, d_g_z2 = gan.step(batch)
