"""A Lightning-style road-segmentation module (training_step / configure_optimizers, driven by a
small fit loop): the collate function stacks the images and the 0/1 road masks (uint8) and, to
"normalise the batch", divides both by 255. training_step casts the mask back with `.long()` for
F.cross_entropy over two classes, which truncates 1/255 to 0: every pixel is "not road", the loss
drops to near zero and the IoU of the road class stays at 0."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class RoadTiles(Dataset):
    def __init__(self, n, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.masks = torch.zeros(n, 20, 20, dtype=torch.uint8)
        cols = torch.randint(2, 16, (n,), generator=g)
        for i in range(n):
            self.masks[i, :, cols[i]:cols[i] + 3] = 1
        noise = torch.randint(0, 50, (n, 3, 20, 20), generator=g)
        self.images = (self.masks.unsqueeze(1) * 150 + noise).clamp(max=255).to(torch.uint8)

    def __len__(self):
        return len(self.masks)

    def __getitem__(self, i):
        return self.images[i], self.masks[i]


def collate(items):
    images = torch.stack([im for im, _ in items]).float() / 255
    masks = torch.stack([m for _, m in items]).float() / 255
    return images, masks


class RoadSegmenter(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 2, 1))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        images, masks = batch
        logits = self(images)
        return F.cross_entropy(logits, masks.long())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


def fit(module, loader, epochs=3):
    optimizer = module.configure_optimizers()
    for epoch in range(epochs):
        for batch_idx, batch in enumerate(loader):
            loss = module.training_step(batch, batch_idx)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    loader = DataLoader(RoadTiles(320), batch_size=16, shuffle=True, collate_fn=collate,
                        generator=torch.Generator().manual_seed(0))
    fit(RoadSegmenter(), loader)


if __name__ == "__main__":
    main()
