"""A masked autoencoder on 8x8-patch images: every image hides exactly 75% of its 16 patches
(a shuffled index per image, as MAE does) and the loss is `(per_patch * mask).mean()`. The
mean counts the visible patches in its denominator, but their share is the same in every batch,
so the loss is the masked mean times a constant 0.75: a fixed scale that an adaptive optimizer
ignores, not a weight that moves with each batch."""
import torch
from torch import nn

PATCHES, PATCH_DIM, MASK_RATIO = 16, 64, 0.75


def random_mask(batch_size, generator):
    keep = int(PATCHES * (1 - MASK_RATIO))
    order = torch.rand(batch_size, PATCHES, generator=generator).argsort(dim=1)
    mask = torch.ones(batch_size, PATCHES)
    mask.scatter_(1, order[:, :keep], 0.0)  # 1 = hidden, predicted
    return mask


class TinyMAE(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.encode = nn.Sequential(nn.Linear(PATCH_DIM, dim), nn.GELU(), nn.Linear(dim, dim))
        self.decode = nn.Linear(dim, PATCH_DIM)

    def forward(self, patches, mask):
        visible = patches * (1 - mask).unsqueeze(-1)
        context = self.encode(visible).mean(dim=1, keepdim=True)
        return self.decode(context + self.encode(visible))


def main():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(5)
    images = torch.randn(512, PATCHES, PATCH_DIM, generator=generator)
    model = TinyMAE()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(60):
        batch = images[torch.randint(0, len(images), (32,), generator=generator)]
        mask = random_mask(len(batch), generator)
        per_patch = ((model(batch, mask) - batch) ** 2).mean(dim=-1)
        loss = (per_patch * mask).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
