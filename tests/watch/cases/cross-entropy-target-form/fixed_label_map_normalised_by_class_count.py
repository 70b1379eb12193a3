"""The fixed twin: the collate function scales only the bands; the label map keeps its ids 0-4, so the
cast to long in training_step leaves five classes."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

NUM_CLASSES = 5
RANGES = {"bands": 4095.0}   # only the bands are measurements


class TileDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        signatures = torch.rand(NUM_CLASSES, 4, generator=torch.Generator().manual_seed(7)) * 3000 + 500
        for _ in range(n):
            labels = torch.randint(0, NUM_CLASSES, (3, 3), generator=g).repeat_interleave(4, 0).repeat_interleave(4, 1)
            bands = signatures[labels].permute(2, 0, 1) + 150 * torch.randn(4, 12, 12, generator=g)
            self.items.append({"bands": bands.clamp(0, 4095), "labels": labels.float()})

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate_and_normalise(items):
    batch = {key: torch.stack([item[key] for item in items]) for key in items[0]}
    return {key: value / RANGES[key] if key in RANGES else value for key, value in batch.items()}


class LandCoverModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(4, 24, 3, padding=1), nn.ReLU(), nn.Conv2d(24, NUM_CLASSES, 1))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        return F.cross_entropy(self(batch["bands"]), batch["labels"].long())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def fit(module, loader, max_epochs):
    optimizer = module.configure_optimizers()
    for epoch in range(max_epochs):
        for i, batch in enumerate(loader):
            loss = module.training_step(batch, i)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    loader = DataLoader(TileDataset(480, 0), batch_size=16, shuffle=True, collate_fn=collate_and_normalise,
                        generator=torch.Generator().manual_seed(0))
    fit(LandCoverModule(), loader, max_epochs=3)


if __name__ == "__main__":
    main()
