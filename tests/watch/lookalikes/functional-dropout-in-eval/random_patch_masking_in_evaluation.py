"""A masked autoencoder in the style of MAE: random_masking() draws one uniform number per patch,
`noise = torch.rand(N, L)`, argsorts it and keeps the first quarter of the patches; the decoder
reconstructs the rest and the loss is taken on the masked patches only. The validation pass runs
in eval mode under no_grad and masks at random as well, on purpose: the reconstruction loss is
defined on a random mask. The draws are ranked, never thresholded into a dropout mask. (The
decoder here sees the visible patches through their mean, where MAE's attends to them.)"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

PATCHES, PATCH_DIM, KEEP = 16, 12, 0.25


class TinyMAE(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.embed = nn.Linear(PATCH_DIM, dim)
        self.pos = nn.Parameter(torch.randn(1, PATCHES, dim) * 0.02)
        self.encoder = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.decoder = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, PATCH_DIM))

    def random_masking(self, x):
        N, L, D = x.shape
        len_keep = int(L * KEEP)
        noise = torch.rand(N, L, device=x.device)
        ids_shuffle = torch.argsort(noise, dim=1)
        ids_restore = torch.argsort(ids_shuffle, dim=1)
        ids_keep = ids_shuffle[:, :len_keep]
        x_masked = torch.gather(x, 1, ids_keep.unsqueeze(-1).repeat(1, 1, D))
        mask = torch.ones(N, L, device=x.device)
        mask[:, :len_keep] = 0
        return x_masked, torch.gather(mask, 1, ids_restore), ids_restore

    def forward(self, patches):
        x = self.embed(patches) + self.pos
        x, mask, ids_restore = self.random_masking(x)
        x = self.encoder(x)
        fill = self.mask_token.repeat(x.shape[0], PATCHES - x.shape[1], 1)
        x = torch.cat([x, fill], 1) + x.mean(1, keepdim=True)  # the decoder's view of the visible patches
        x = torch.gather(x, 1, ids_restore.unsqueeze(-1).repeat(1, 1, x.shape[2])) + self.pos
        pred = self.decoder(x)
        loss = ((pred - patches) ** 2).mean(-1)
        return (loss * mask).sum() / mask.sum()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = torch.randn(600, PATCHES, PATCH_DIM, generator=g).cumsum(1) / 4
    train = DataLoader(TensorDataset(data[:500]), batch_size=25, shuffle=True, generator=g)
    val = DataLoader(TensorDataset(data[500:]), batch_size=50)
    model = TinyMAE()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(3):
        model.train()
        for (xb,) in train:
            loss = model(xb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val_loss = sum(model(xb).item() for (xb,) in val) / len(val)
        print(f"epoch {epoch} val loss {val_loss:.4f}")


if __name__ == "__main__":
    main()
