"""A multinomial-diffusion segmentation model: a MultinomialDiffusion wrapper that corrupts one-hot
label maps towards the uniform distribution over a fixed beta schedule and trains with the KL
between the true posterior q(x_{t-1} | x_t, x_0) and the model's posterior (built from its x_0
prediction), and a SegmentationUnet whose forward(time, x) embeds each categorical pixel with
nn.Embedding, flattens the embedding into channels, and runs a small time-conditioned U-Net. After
the embedding the tensor is (B, C, H, W, dim); the code permutes it to (B, C, W, H, dim) and then
reshapes to (B, C * dim, H, W). The reshape does not move dim in front of the spatial axes, it
only re-cuts the flat memory, so each "channel" ends up holding every embedding component of a
strip of pixels and neighbouring positions of the grid come from unrelated pixels. The convolutions
never see the label map's local structure; training runs and the loss falls, but far more slowly
and to a worse value than with permute(0, 1, 4, 2, 3).

Thread: https://github.com/ehoogeboom/multinomial_diffusion/issues/1
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

NUM_CLASSES = 4
SIZE = 16
T = 50


def make_label_maps(n, seed):
    g = torch.Generator().manual_seed(seed)
    maps = torch.zeros(n, SIZE, SIZE, dtype=torch.long)
    for i in range(n):
        for c in range(1, NUM_CLASSES):
            h, w = torch.randint(4, 9, (2,), generator=g).tolist()
            y, x = torch.randint(0, SIZE - h + 1, (1,), generator=g).item(), \
                torch.randint(0, SIZE - w + 1, (1,), generator=g).item()
            maps[i, y:y + h, x:x + w] = c
    return maps


class SinusoidalPosEmb(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, t):
        half = self.dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half) / (half - 1))
        args = t.float()[:, None] * freqs[None]
        return torch.cat([args.sin(), args.cos()], dim=-1)


class ResnetBlock(nn.Module):
    def __init__(self, dim_in, dim_out, time_emb_dim):
        super().__init__()
        self.mlp = nn.Linear(time_emb_dim, dim_out)
        self.block1 = nn.Sequential(nn.Conv2d(dim_in, dim_out, 3, padding=1), nn.GroupNorm(4, dim_out), nn.SiLU())
        self.block2 = nn.Sequential(nn.Conv2d(dim_out, dim_out, 3, padding=1), nn.GroupNorm(4, dim_out), nn.SiLU())
        self.res_conv = nn.Conv2d(dim_in, dim_out, 1) if dim_in != dim_out else nn.Identity()

    def forward(self, x, t):
        h = self.block1(x) + self.mlp(t)[:, :, None, None]
        return self.block2(h) + self.res_conv(x)


class SegmentationUnet(nn.Module):
    def __init__(self, num_classes, dim=16):
        super().__init__()
        self.num_classes, self.dim = num_classes, dim
        self.embedding = nn.Embedding(num_classes, dim)
        self.time_pos_emb = SinusoidalPosEmb(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * 4), nn.SiLU(), nn.Linear(dim * 4, dim))
        self.down1 = ResnetBlock(dim, dim, dim)
        self.downsample = nn.Conv2d(dim, 2 * dim, 4, stride=2, padding=1)
        self.mid = ResnetBlock(2 * dim, 2 * dim, dim)
        self.upsample = nn.ConvTranspose2d(2 * dim, dim, 4, stride=2, padding=1)
        self.up1 = ResnetBlock(2 * dim, dim, dim)
        self.final_conv = nn.Conv2d(dim, num_classes, 1)

    def forward(self, time, x):
        x_shape = x.size()[1:]
        if x.dim() == 3:
            x = x.unsqueeze(1)
        B, C, H, W = x.size()
        x = self.embedding(x)                    # B x C x H x W x dim
        x = x.permute(0, 1, 3, 2, 4)             # B x C x W x H x dim
        x = x.reshape(B, C * self.dim, H, W)
        t = self.mlp(self.time_pos_emb(time))
        h = self.down1(x, t)
        x = self.mid(self.downsample(h), t)
        x = self.up1(torch.cat([self.upsample(x), h], dim=1), t)
        return self.final_conv(x).view(B, self.num_classes, *x_shape)


class MultinomialDiffusion(nn.Module):
    def __init__(self, num_classes, denoise_fn, timesteps):
        super().__init__()
        self.num_classes, self._denoise_fn, self.num_timesteps = num_classes, denoise_fn, timesteps
        betas = torch.linspace(1e-3, 0.25, timesteps)
        alphas = 1 - betas
        self.register_buffer("alphas", alphas)
        self.register_buffer("alphas_cumprod", torch.cumprod(alphas, 0))

    def q_probs(self, x0_probs, t):
        ab = self.alphas_cumprod[t][:, None, None, None]
        return ab * x0_probs + (1 - ab) / self.num_classes

    def posterior(self, xt_onehot, x0_probs, t):
        a = self.alphas[t][:, None, None, None]
        ab_prev = torch.where(t > 0, self.alphas_cumprod[(t - 1).clamp(min=0)],
                              torch.ones_like(t, dtype=torch.float))[:, None, None, None]
        left = a * xt_onehot + (1 - a) / self.num_classes
        right = ab_prev * x0_probs + (1 - ab_prev) / self.num_classes
        unnorm = left * right
        return unnorm / unnorm.sum(1, keepdim=True)

    def loss(self, x0):
        B = x0.size(0)
        t = torch.randint(0, self.num_timesteps, (B,))
        x0_onehot = F.one_hot(x0, self.num_classes).permute(0, 3, 1, 2).float()
        probs_t = self.q_probs(x0_onehot, t)
        xt = torch.multinomial(probs_t.permute(0, 2, 3, 1).reshape(-1, self.num_classes), 1)
        xt = xt.view(B, SIZE, SIZE)
        xt_onehot = F.one_hot(xt, self.num_classes).permute(0, 3, 1, 2).float()
        x0_pred = F.softmax(self._denoise_fn(t, xt), dim=1)
        q_post = self.posterior(xt_onehot, x0_onehot, t)
        p_post = self.posterior(xt_onehot, x0_pred, t)
        kl = (q_post * (torch.log(q_post + 1e-8) - torch.log(p_post + 1e-8))).sum(1)
        nll0 = -(x0_onehot * torch.log(x0_pred + 1e-8)).sum(1)
        per_pixel = torch.where((t == 0)[:, None, None], nll0, kl)
        return per_pixel.mean() * self.num_timesteps / math.log(2)   # bits per pixel


def main():
    torch.manual_seed(0)
    train_maps = make_label_maps(1024, seed=1)
    eval_maps = make_label_maps(128, seed=2)
    model = MultinomialDiffusion(NUM_CLASSES, SegmentationUnet(NUM_CLASSES, dim=16), T)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    g = torch.Generator().manual_seed(0)
    step = 0
    for epoch in range(4):
        model.train()
        perm = torch.randperm(len(train_maps), generator=g)
        total = 0.0
        for i in range(0, len(perm), 32):
            loss = model.loss(train_maps[perm[i:i + 32]])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            step += 1
        model.eval()
        with torch.no_grad():
            torch.manual_seed(100)
            eval_bpp = sum(model.loss(eval_maps[j:j + 64]).item() for j in range(0, 128, 64)) / 2
        print(f"epoch {epoch}  step {step}  train_bpp {total / (len(perm) // 32):.4f}  eval_bpp {eval_bpp:.4f}")


if __name__ == "__main__":
    main()
