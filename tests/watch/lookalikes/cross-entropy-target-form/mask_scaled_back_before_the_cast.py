"""Healthy look-alike of cross-entropy-target-form: the dataset sends image and mask through the same
to_tensor() (uint8 / 255), and the training step undoes it for the mask before the cast,
`(mask * 255).round().long()`, so the targets keep the class ids 0-3; a second loss on a float copy of
the ids (whole numbers stored as float, cast with .long()) is also correct."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


def to_tensor(picture_uint8):
    return picture_uint8.permute(2, 0, 1).float() / 255


class ShapesDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.images, self.masks = [], []
        for _ in range(n):
            mask = torch.zeros(16, 16, 1, dtype=torch.uint8)
            image = torch.randint(0, 40, (16, 16, 1), generator=g).to(torch.uint8)
            for cls in (1, 2, 3):            # three objects of 8x8 on a 16x16 picture: no class dominates
                r, c = torch.randint(0, 9, (2,), generator=g).tolist()
                mask[r:r + 8, c:c + 8] = cls
                image[r:r + 8, c:c + 8] = 60 * cls + torch.randint(0, 30, (8, 8, 1), generator=g).to(torch.uint8)
            self.images.append(image)
            self.masks.append(mask)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        mask = self.masks[i]
        return to_tensor(self.images[i]), to_tensor(mask), mask.permute(2, 0, 1).float()


def main():
    torch.manual_seed(0)
    loader = DataLoader(ShapesDataset(480, 0), batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(0))
    net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                        nn.Conv2d(16, 4, 1))
    aux = nn.Conv2d(1, 4, 1)
    optimizer = torch.optim.Adam(list(net.parameters()) + list(aux.parameters()), lr=3e-3)
    for epoch in range(3):
        for image, mask, float_ids in loader:
            target = (mask.squeeze(1) * 255).round().long()
            loss = F.cross_entropy(net(image), target) + 0.1 * F.cross_entropy(aux(image), float_ids.squeeze(1).long())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
