"""Healthy look-alike of cross-entropy-target-form: a lesion segmenter trained on tiles where most
tiles hold no lesion, so many batches have all-zero targets; the grey images are uint8 scans divided
by 255 with the same number of elements as the masks (values in [0, 1], below 1, which truncate to 0
as well). The masks are integer ids, and the images take far more values than a mask's few levels."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def tiles(n, seed):
    g = torch.Generator().manual_seed(seed)
    scans = torch.randint(0, 200, (n, 1, 12, 12), generator=g).to(torch.uint8)
    masks = torch.zeros(n, 12, 12, dtype=torch.long)
    for i in range(0, n, 40):            # one tile in forty holds a lesion
        r, c = torch.randint(0, 8, (2,), generator=g).tolist()
        masks[i, r:r + 4, c:c + 4] = 1
        scans[i, 0, r:r + 4, c:c + 4] = 254
    return scans.float() / 255, masks


def main():
    torch.manual_seed(0)
    x, y = tiles(640, 0)
    # most batches of eight hold no lesion at all
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))
    net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 2, 1))
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
    for epoch in range(2):
        for scan, mask in loader:
            loss = F.cross_entropy(net(scan), mask)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
