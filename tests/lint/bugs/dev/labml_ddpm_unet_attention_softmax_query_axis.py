"""
Shape: DDPM U-Net module (TimeEmbedding, ResidualBlock, AttentionBlock with einsum scores, Down/Up/Middle blocks in nn.ModuleList) plus a DenoiseDiffusion wrapper whose loss() noises x0 and regresses eps; a labml Configs class with init() building UNet(...).to(device), DataLoader and Adam, train() looping over the loader, run() looping epochs with sampling.
Bug: AttentionBlock normalises the (batch, i, j, heads) score tensor with attn.softmax(dim=1), i.e. over the query positions instead of the key axis j (dim=2).
Thread: https://github.com/labmlai/annotated_deep_learning_paper_implementations/issues/146
"""
import math
from typing import List, Optional

import torch
import torch.nn.functional as F
import torch.utils.data
from labml.configs import BaseConfigs
from labml_helpers.device import DeviceConfigs
from torch import nn


class Swish(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


class TimeEmbedding(nn.Module):
    def __init__(self, n_channels: int):
        super().__init__()
        self.n_channels = n_channels
        self.lin1 = nn.Linear(n_channels // 4, n_channels)
        self.act = Swish()
        self.lin2 = nn.Linear(n_channels, n_channels)

    def forward(self, t):
        half = self.n_channels // 8
        freq = torch.exp(torch.arange(half, device=t.device) * -(math.log(10_000) / (half - 1)))
        ang = t[:, None] * freq[None, :]
        emb = torch.cat((ang.sin(), ang.cos()), dim=1)
        return self.lin2(self.act(self.lin1(emb)))


class ResidualBlock(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, time_ch: int, n_groups: int = 32):
        super().__init__()
        self.norm1 = nn.GroupNorm(n_groups, in_ch)
        self.act1 = Swish()
        self.conv1 = nn.Conv2d(in_ch, out_ch, kernel_size=(3, 3), padding=(1, 1))
        self.norm2 = nn.GroupNorm(n_groups, out_ch)
        self.act2 = Swish()
        self.conv2 = nn.Conv2d(out_ch, out_ch, kernel_size=(3, 3), padding=(1, 1))
        self.shortcut = nn.Conv2d(in_ch, out_ch, kernel_size=(1, 1)) if in_ch != out_ch else nn.Identity()
        self.time_emb = nn.Linear(time_ch, out_ch)

    def forward(self, x, t):
        h = self.conv1(self.act1(self.norm1(x)))
        h += self.time_emb(t)[:, :, None, None]
        h = self.conv2(self.act2(self.norm2(h)))
        return h + self.shortcut(x)


class AttentionBlock(nn.Module):
    def __init__(self, n_channels: int, n_heads: int = 1, d_k: int = None, n_groups: int = 32):
        super().__init__()
        d_k = n_channels if d_k is None else d_k
        self.norm = nn.GroupNorm(n_groups, n_channels)
        self.projection = nn.Linear(n_channels, n_heads * d_k * 3)
        self.output = nn.Linear(n_heads * d_k, n_channels)
        self.scale = d_k ** -0.5
        self.n_heads = n_heads
        self.d_k = d_k

    def forward(self, x, t: Optional[torch.Tensor] = None):
        b, c, hgt, wid = x.shape
        x = x.view(b, c, -1).permute(0, 2, 1)
        qkv = self.projection(x).view(b, -1, self.n_heads, 3 * self.d_k)
        q, k, v = torch.chunk(qkv, 3, dim=-1)
        attn = torch.einsum("bihd,bjhd->bijh", q, k) * self.scale
        attn = attn.softmax(dim=1)
        out = torch.einsum("bijh,bjhd->bihd", attn, v)
        out = self.output(out.reshape(b, -1, self.n_heads * self.d_k))
        out += x
        return out.permute(0, 2, 1).reshape(b, c, hgt, wid)


class DownBlock(nn.Module):
    def __init__(self, in_ch, out_ch, time_ch, has_attn):
        super().__init__()
        self.res = ResidualBlock(in_ch, out_ch, time_ch)
        self.attn = AttentionBlock(out_ch) if has_attn else nn.Identity()

    def forward(self, x, t):
        return self.attn(self.res(x, t))


class UpBlock(nn.Module):
    def __init__(self, in_ch, out_ch, time_ch, has_attn):
        super().__init__()
        self.res = ResidualBlock(in_ch + out_ch, out_ch, time_ch)
        self.attn = AttentionBlock(out_ch) if has_attn else nn.Identity()

    def forward(self, x, t):
        return self.attn(self.res(x, t))


class MiddleBlock(nn.Module):
    def __init__(self, n_channels, time_ch):
        super().__init__()
        self.res1 = ResidualBlock(n_channels, n_channels, time_ch)
        self.attn = AttentionBlock(n_channels)
        self.res2 = ResidualBlock(n_channels, n_channels, time_ch)

    def forward(self, x, t):
        return self.res2(self.attn(self.res1(x, t)), t)


class Upsample(nn.Module):
    def __init__(self, n_channels):
        super().__init__()
        self.conv = nn.ConvTranspose2d(n_channels, n_channels, (4, 4), (2, 2), (1, 1))

    def forward(self, x, t):
        return self.conv(x)


class Downsample(nn.Module):
    def __init__(self, n_channels):
        super().__init__()
        self.conv = nn.Conv2d(n_channels, n_channels, (3, 3), (2, 2), (1, 1))

    def forward(self, x, t):
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, image_channels=3, n_channels=64, ch_mults=(1, 2, 2, 4), is_attn=(False, False, True, True), n_blocks=2):
        super().__init__()
        n_res = len(ch_mults)
        self.image_proj = nn.Conv2d(image_channels, n_channels, kernel_size=(3, 3), padding=(1, 1))
        self.time_emb = TimeEmbedding(n_channels * 4)
        down = []
        out_ch = in_ch = n_channels
        for i in range(n_res):
            out_ch = in_ch * ch_mults[i]
            for _ in range(n_blocks):
                down.append(DownBlock(in_ch, out_ch, n_channels * 4, is_attn[i]))
                in_ch = out_ch
            if i < n_res - 1:
                down.append(Downsample(in_ch))
        self.down = nn.ModuleList(down)
        self.middle = MiddleBlock(out_ch, n_channels * 4)
        up = []
        in_ch = out_ch
        for i in reversed(range(n_res)):
            out_ch = in_ch
            for _ in range(n_blocks):
                up.append(UpBlock(in_ch, out_ch, n_channels * 4, is_attn[i]))
            out_ch = in_ch // ch_mults[i]
            up.append(UpBlock(in_ch, out_ch, n_channels * 4, is_attn[i]))
            in_ch = out_ch
            if i > 0:
                up.append(Upsample(in_ch))
        self.up = nn.ModuleList(up)
        self.norm = nn.GroupNorm(8, n_channels)
        self.act = Swish()
        self.final = nn.Conv2d(in_ch, image_channels, kernel_size=(3, 3), padding=(1, 1))

    def forward(self, x, t):
        t = self.time_emb(t)
        x = self.image_proj(x)
        skips = [x]
        for m in self.down:
            x = m(x, t)
            skips.append(x)
        x = self.middle(x, t)
        for m in self.up:
            if isinstance(m, Upsample):
                x = m(x, t)
            else:
                x = m(torch.cat((x, skips.pop()), dim=1), t)
        return self.final(self.act(self.norm(x)))


def gather(consts, t):
    return consts.gather(-1, t).reshape(-1, 1, 1, 1)


class DenoiseDiffusion:
    def __init__(self, eps_model: nn.Module, n_steps: int, device: torch.device):
        self.eps_model = eps_model
        self.beta = torch.linspace(0.0001, 0.02, n_steps).to(device)
        self.alpha = 1.0 - self.beta
        self.alpha_bar = torch.cumprod(self.alpha, dim=0)
        self.n_steps = n_steps
        self.sigma2 = self.beta

    def q_sample(self, x0, t, eps=None):
        eps = torch.randn_like(x0) if eps is None else eps
        abar = gather(self.alpha_bar, t)
        return abar ** 0.5 * x0 + (1 - abar) ** 0.5 * eps

    def p_sample(self, xt, t):
        eps_theta = self.eps_model(xt, t)
        abar = gather(self.alpha_bar, t)
        a = gather(self.alpha, t)
        mean = 1 / (a ** 0.5) * (xt - (1 - a) / (1 - abar) ** 0.5 * eps_theta)
        return mean + gather(self.sigma2, t) ** 0.5 * torch.randn(xt.shape, device=xt.device)

    def loss(self, x0, noise=None):
        t = torch.randint(0, self.n_steps, (x0.shape[0],), device=x0.device, dtype=torch.long)
        noise = torch.randn_like(x0) if noise is None else noise
        xt = self.q_sample(x0, t, eps=noise)
        return F.mse_loss(noise, self.eps_model(xt, t))


class Configs(BaseConfigs):
    device: torch.device = DeviceConfigs()
    image_channels: int = 3
    image_size: int = 32
    n_channels: int = 64
    channel_multipliers: List[int] = [1, 2, 2, 4]
    is_attention: List[int] = [False, False, False, True]
    n_steps: int = 1_000
    batch_size: int = 64
    n_samples: int = 16
    learning_rate: float = 2e-5
    epochs: int = 1_000
    dataset: torch.utils.data.Dataset

    def init(self):
        self.eps_model = UNet(image_channels=self.image_channels, n_channels=self.n_channels,
                              ch_mults=self.channel_multipliers, is_attn=self.is_attention).to(self.device)
        self.diffusion = DenoiseDiffusion(eps_model=self.eps_model, n_steps=self.n_steps, device=self.device)
        self.data_loader = torch.utils.data.DataLoader(self.dataset, self.batch_size, shuffle=True, pin_memory=True)
        self.optimizer = torch.optim.Adam(self.eps_model.parameters(), lr=self.learning_rate)

    def sample(self):
        with torch.no_grad():
            x = torch.randn([self.n_samples, self.image_channels, self.image_size, self.image_size], device=self.device)
            for step in range(self.n_steps):
                t = self.n_steps - step - 1
                x = self.diffusion.p_sample(x, x.new_full((self.n_samples,), t, dtype=torch.long))
        return x

    def train(self):
        for batch in self.data_loader:
            batch = batch.to(self.device)
            self.optimizer.zero_grad()
            loss = self.diffusion.loss(batch)
            loss.backward()
            self.optimizer.step()

    def run(self):
        for _ in range(self.epochs):
            self.train()
            self.sample()
