"""A RealFill-style fine-tuning script: a RealFillDataset serves a few reference images of a scene
(loss weighting all ones) and the target image whose unknown region must be filled (loss weighting
1 on the known pixels, 0 on the region to fill); each example goes through a random
resized-crop + horizontal-flip transform, gets a random inpainting mask, and collate_fn stacks
images, weightings, masks and masked conditioning images. The training loop adds noise at a random
DDPM timestep, feeds cat([noisy, mask, conditioning]) to a small conditional denoiser, and takes
the noise-prediction MSE multiplied by the weighting, with AdamW and a constant schedule.
The bug: the target image and its weighting are passed through the random transform in two
separate calls, so each gets its own crop box and flip: the weighting no longer lines up with the
image, the loss is computed on pixels of the region that is supposed to be unknown (leaking the
answer into training) and ignores known pixels, and the fill is learned from misplaced supervision.

Thread: https://github.com/thuanz123/realfill/issues/4
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

SIZE, T_STEPS = 16, 100


class RandomResizedCropFlip:
    """Own stand-in for Compose([RandomResizedCrop(size, scale=(0.5, 1)), RandomHorizontalFlip()]):
    draws a fresh box and flip on every call."""

    def __init__(self, size, generator):
        self.size, self.g = size, generator

    def __call__(self, img):
        h, w = img.shape[-2:]
        scale = 0.5 + 0.5 * torch.rand(1, generator=self.g).item()
        ch, cw = max(4, int(h * math.sqrt(scale))), max(4, int(w * math.sqrt(scale)))
        top = int(torch.randint(0, h - ch + 1, (1,), generator=self.g))
        left = int(torch.randint(0, w - cw + 1, (1,), generator=self.g))
        out = F.interpolate(img[None, :, top:top + ch, left:left + cw], size=(self.size, self.size),
                            mode="bilinear", align_corners=False)[0]
        if torch.rand(1, generator=self.g).item() < 0.5:
            out = out.flip(-1)
        return out


def scene(g, n_views):
    """One scene seen from shifted viewpoints: smooth colour blobs on a gradient background."""
    big = 32
    yy, xx = torch.meshgrid(torch.linspace(0, 1, big), torch.linspace(0, 1, big), indexing="ij")
    canvas = torch.stack([0.3 + 0.4 * xx, 0.2 + 0.3 * yy, 0.5 - 0.2 * xx])
    for _ in range(6):
        cy, cx = torch.rand(2, generator=g).tolist()
        col = torch.rand(3, 1, 1, generator=g)
        canvas = canvas + col * torch.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 0.01)
    canvas = canvas.clamp(0, 1) * 2 - 1
    views = []
    for _ in range(n_views):
        oy, ox = torch.randint(0, big - 24 + 1, (2,), generator=g).tolist()
        views.append(canvas[:, oy:oy + 24, ox:ox + 24])
    return views


class RealFillDataset:
    def __init__(self, seed=0, n_ref=6):
        self.g = torch.Generator().manual_seed(seed)
        views = scene(self.g, n_ref + 1)
        self.ref_images, self.target_image = views[:-1], views[-1]
        self.target_weighting = torch.ones(1, 24, 24)
        self.target_weighting[:, 6:18, 8:20] = 0.0  # the region RealFill must fill
        self.transform = RandomResizedCropFlip(SIZE, self.g)

    def __len__(self):
        return len(self.ref_images) + 1

    def make_mask(self):
        m = torch.zeros(1, SIZE, SIZE)
        y, x = torch.randint(0, SIZE - 6, (2,), generator=self.g).tolist()
        m[:, y:y + 6, x:x + 6] = 1.0
        return m

    def __getitem__(self, i):
        if i < len(self.ref_images):
            image = self.transform(self.ref_images[i])
            weighting = torch.ones(1, SIZE, SIZE)
        else:
            image = self.transform(self.target_image)
            weighting = (self.transform(self.target_weighting) > 0.5).float()
        mask = self.make_mask()
        return {"images": image, "weightings": weighting, "masks": mask,
                "conditioning_images": image * (mask < 0.5)}


def collate_fn(examples):
    return {k: torch.stack([e[k] for e in examples]) for k in examples[0]}


class Denoiser(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.t_emb = nn.Embedding(T_STEPS, ch)
        self.inp = nn.Conv2d(3 + 1 + 3, ch, 3, 1, 1)
        self.mid = nn.Sequential(nn.SiLU(), nn.Conv2d(ch, ch, 3, 1, 1), nn.SiLU(), nn.Conv2d(ch, ch, 3, 1, 1))
        self.out = nn.Conv2d(ch, 3, 3, 1, 1)

    def forward(self, x, t):
        h = self.inp(x) + self.t_emb(t)[:, :, None, None]
        return self.out(h + self.mid(h))


def main():
    torch.manual_seed(0)
    ds = RealFillDataset(seed=0)
    betas = torch.linspace(1e-4, 0.05, T_STEPS)
    alphas_cumprod = torch.cumprod(1 - betas, 0)
    unet = Denoiser()
    optimizer = torch.optim.AdamW(unet.parameters(), lr=2e-3, weight_decay=1e-2)
    g = torch.Generator().manual_seed(1)
    batch_size, max_train_steps = 8, 80
    for step in range(max_train_steps):
        idx = torch.randint(0, len(ds), (batch_size - 1,), generator=g).tolist() + [len(ds) - 1]
        batch = collate_fn([ds[i] for i in idx])
        latents = batch["images"]
        noise = torch.randn(latents.shape, generator=g)
        timesteps = torch.randint(0, T_STEPS, (batch_size,), generator=g)
        a = alphas_cumprod[timesteps].view(-1, 1, 1, 1)
        noisy = a.sqrt() * latents + (1 - a).sqrt() * noise
        inputs = torch.cat([noisy, batch["masks"], batch["conditioning_images"]], dim=1)
        model_pred = unet(inputs, timesteps)
        w = batch["weightings"]
        loss = (F.mse_loss(model_pred, noise, reduction="none") * w).sum() / (w.sum() * 3)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print(f"finished {max_train_steps} steps, final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
