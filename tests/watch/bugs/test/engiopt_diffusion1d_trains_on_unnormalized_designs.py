"""A 1D diffusion training script for vector-valued engineering designs: prepare_data() pads the
flattened designs to a multiple of 8 and returns a TensorDataset plus a min/max Normalizer fitted
on the training set; a noise-prediction denoiser is wrapped in a GaussianDiffusion1D-style module
(cosine schedule, 1000 steps, auto_normalize maps [0, 1] inputs to [-1, 1], forward() returns the
MSE between predicted and true noise, sample() clips x0 to [-1, 1] and maps back to [0, 1]); Adam
with betas (0.5, 0.999); the loop takes each batch, builds designs_flat = designs.view(B, 1, -1),
then normalizes designs, and calls diffusion(designs_flat); samples are denormalized with the same
Normalizer. designs_flat is taken before the normalization, so the diffusion is trained on the raw
designs (one coordinate reaches about 8, the surface offsets sit near -1 after the [-1, 1] map)
while sampling clips to [-1, 1] and denormalizes as if the model had learned normalized designs:
the model fits a scale it is never sampled on.

Thread: https://github.com/IDEALLab/EngiOpt/issues/64
"""
import math

import numpy as np
import torch as th
import torch.nn.functional as F
from torch import nn


class Normalizer:
    def __init__(self, min_val, max_val, eps=1e-7):
        self.eps, self.min_val, self.max_val = eps, min_val, max_val

    def normalize(self, x):
        return (x - self.min_val) / (self.max_val - self.min_val + self.eps)

    def denormalize(self, x):
        return x * (self.max_val - self.min_val + self.eps) + self.min_val


def airfoil_like_designs(n, seed):
    """19 upper + 19 lower surface offsets (about -0.13..0.13) and an angle in 0..8.15."""
    g = th.Generator().manual_seed(seed)
    s = th.linspace(0, 1, 19)
    thick = 0.05 + 0.07 * th.rand(n, 1, generator=g)
    camber = 0.04 * th.rand(n, 1, generator=g)
    shape = th.sin(math.pi * s) * (1 - 0.5 * s)
    upper, lower = camber * shape + thick * shape, camber * shape - thick * shape
    angle = 8.15 * th.rand(n, 1, generator=g)
    return th.cat([upper, lower, angle], 1)


def prepare_data(designs, padding_size):
    padded = F.pad(designs, (0, padding_size), mode="constant", value=0) if padding_size > 0 else designs
    training_ds = th.utils.data.TensorDataset(padded)
    design_min, design_max = padded.amin(0), padded.amax(0)
    return training_ds, Normalizer(design_min, design_max)


class Denoiser1D(nn.Module):
    def __init__(self, seq_length, dim=32):
        super().__init__()
        self.dim = dim
        self.net = nn.Sequential(nn.Linear(seq_length + dim, 256), nn.SiLU(), nn.Linear(256, 256), nn.SiLU(),
                                 nn.Linear(256, seq_length))

    def forward(self, x, t):
        freqs = th.exp(-math.log(10000) * th.arange(self.dim // 2) / (self.dim // 2))
        emb = t.float()[:, None] * freqs[None]
        return self.net(th.cat([x.flatten(1), emb.sin(), emb.cos()], 1)).view_as(x)


class GaussianDiffusion1D(nn.Module):
    def __init__(self, model, seq_length, timesteps=1000, auto_normalize=True):
        super().__init__()
        self.model, self.seq_length, self.num_timesteps = model, seq_length, timesteps
        steps = th.linspace(0, timesteps, timesteps + 1, dtype=th.float64) / timesteps
        ac = th.cos((steps + 0.008) / 1.008 * math.pi * 0.5) ** 2
        betas = th.clip(1 - ac[1:] / ac[:-1], 0, 0.999)
        alphas_cumprod = th.cumprod(1 - betas, 0)
        self.register_buffer("betas", betas.float())
        self.register_buffer("alphas_cumprod", alphas_cumprod.float())
        self.normalize = (lambda x: x * 2 - 1) if auto_normalize else (lambda x: x)
        self.unnormalize = (lambda x: (x + 1) * 0.5) if auto_normalize else (lambda x: x)

    def forward(self, img):
        img = self.normalize(img)
        t = th.randint(0, self.num_timesteps, (img.shape[0],))
        noise = th.randn_like(img)
        a = self.alphas_cumprod[t].view(-1, 1, 1)
        x_t = a.sqrt() * img + (1 - a).sqrt() * noise
        return F.mse_loss(self.model(x_t, t), noise)

    @th.no_grad()
    def sample(self, batch_size, stride=20):
        x = th.randn(batch_size, 1, self.seq_length)
        ts = list(range(self.num_timesteps - 1, -1, -stride))
        for i, t in enumerate(ts):
            a = self.alphas_cumprod[t]
            a_prev = self.alphas_cumprod[ts[i + 1]] if i + 1 < len(ts) else th.tensor(1.0)
            eps = self.model(x, th.full((batch_size,), t))
            x0 = ((x - (1 - a).sqrt() * eps) / a.sqrt()).clamp(-1.0, 1.0)
            x = a_prev.sqrt() * x0 + (1 - a_prev).sqrt() * eps
        return self.unnormalize(x)


if __name__ == "__main__":
    th.manual_seed(1)
    n_epochs, batch_size, lr, b1, b2 = 12, 64, 3e-4, 0.5, 0.999
    raw = airfoil_like_designs(1536, seed=0)
    padding_size = (8 - raw.shape[1] % 8) % 8
    design_shape = (raw.shape[1] + padding_size,)
    training_ds, design_normalizer = prepare_data(raw, padding_size)
    dataloader = th.utils.data.DataLoader(training_ds, batch_size=batch_size, shuffle=True,
                                          generator=th.Generator().manual_seed(1))
    model = Denoiser1D(int(np.prod(design_shape)))
    diffusion = GaussianDiffusion1D(model, seq_length=int(np.prod(design_shape)), auto_normalize=True)
    optimizer = th.optim.Adam(diffusion.parameters(), lr=lr, betas=(b1, b2))

    for epoch in range(n_epochs):
        for i, data in enumerate(dataloader):
            designs = data[0]
            designs_flat = designs.view(designs.size(0), 1, -1)
            # Normalize the designs
            designs = design_normalizer.normalize(designs)
            optimizer.zero_grad()
            loss = diffusion(designs_flat)
            loss.backward()
            optimizer.step()
            if i % 12 == 0:
                print(f"[Epoch {epoch}/{n_epochs}] [Batch {i}/{len(dataloader)}] [loss: {loss.item():.4f}]")

    samples = design_normalizer.denormalize(diffusion.sample(batch_size=256).squeeze(1))
    real = training_ds.tensors[0]
    print(f"angle: data mean {real[:, 38].mean():.2f} range [{real[:, 38].min():.2f}, {real[:, 38].max():.2f}], "
          f"sample mean {samples[:, 38].mean():.2f} range [{samples[:, 38].min():.2f}, {samples[:, 38].max():.2f}]")
    print(f"upper surface peak: data mean {real[:, 9].mean():.3f}, sample mean {samples[:, 9].mean():.3f}")
