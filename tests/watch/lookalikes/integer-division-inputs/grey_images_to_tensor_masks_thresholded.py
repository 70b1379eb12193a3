"""A segmentation run whose grey images go through a ToTensor-like to_tensor (values k/255, as many
per batch as the masks have pixels), and whose binary targets come from an annotation probability
map stored as 8-bit (k/255) by thresholding, `(prob > 0.5).long()`: both tensors of the batch are
scaled by 1/255, the targets are not a truncation of them and hold both classes."""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


def to_tensor(pic):
    return torch.from_numpy(np.ascontiguousarray(pic.transpose(2, 0, 1))).float().div(255)


class Cells(Dataset):
    def __init__(self, n, seed=0):
        rng = np.random.default_rng(seed)
        self.prob = np.zeros((n, 24, 24, 1), np.uint8)
        for i in range(n):
            r, q = rng.integers(0, 14, size=2)
            self.prob[i, r:r + 10, q:q + 10, 0] = rng.integers(180, 255)
        self.images = (self.prob // 2 + rng.integers(0, 60, self.prob.shape)).astype(np.uint8)

    def __len__(self):
        return len(self.prob)

    def __getitem__(self, i):
        return to_tensor(self.images[i]), to_tensor(self.prob[i])


def main():
    torch.manual_seed(0)
    loader = DataLoader(Cells(256), batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(0))
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 2, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        for image, prob in loader:
            target = (prob.squeeze(1) > 0.5).long()
            loss = nn.functional.cross_entropy(model(image), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
