"""A semantic-segmentation script on a folder-style dataset of 8-bit images and 8-bit label masks
holding class ids 0..3. The Dataset applies `transform` to the image and `target_transform` to the
mask, and both are the same Compose([to_tensor]) pipeline (to_tensor behaves as torchvision's
ToTensor: HWC uint8 -> CHW float divided by 255). The loop feeds CrossEntropyLoss with
`mask.squeeze(1).long()`, so every class id k, now k/255, is truncated to 0: every pixel is
background, the loss falls fast and pixel accuracy looks high while no class is learned."""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

CLASSES = 4


def to_tensor(pic):
    return torch.from_numpy(np.ascontiguousarray(pic.transpose(2, 0, 1))).float().div(255)


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class SegFolder(Dataset):
    def __init__(self, n, transform=None, target_transform=None, seed=0):
        rng = np.random.default_rng(seed)
        self.masks = np.zeros((n, 24, 24, 1), np.uint8)
        for i in range(n):
            for c in range(1, CLASSES):
                r, q = rng.integers(0, 16, size=2)
                self.masks[i, r:r + 8, q:q + 8, 0] = c
        self.images = (self.masks * 60 + rng.integers(0, 40, self.masks.shape)).astype(np.uint8)
        self.transform, self.target_transform = transform, target_transform

    def __len__(self):
        return len(self.masks)

    def __getitem__(self, i):
        return self.transform(self.images[i]), self.target_transform(self.masks[i])


def main():
    torch.manual_seed(0)
    pipeline = Compose([to_tensor])
    data = SegFolder(256, transform=pipeline, target_transform=pipeline)
    loader = DataLoader(data, batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(0))
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, CLASSES, 1))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        for image, mask in loader:
            out = model(image)
            loss = criterion(out, mask.squeeze(1).long())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        acc = (out.argmax(1) == mask.squeeze(1).long()).float().mean().item()
        print(f"epoch {epoch} loss {loss.item():.4f} pixel acc {acc:.3f}")


if __name__ == "__main__":
    main()
