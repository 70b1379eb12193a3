"""A court-keypoint heatmap trainer in the TennisCourtDetector style: an encoder-decoder
(Conv-ReLU-BatchNorm blocks, max-pool down, upsample back) outputs one heatmap per court
keypoint, a module-level train(model, train_loader, optimizer, criterion, device, epoch,
max_iters) helper runs one epoch with MSELoss on sigmoid(out) against Gaussian target
heatmaps, and main() calls it every epoch with Adam and validates every few epochs by
checking whether each heatmap peak lands near its keypoint. train() calls loss.backward()
and optimizer.step() but never optimizer.zero_grad(), so every .grad keeps the sum of all
gradients since the start of training: each Adam step follows the running total of past
batches rather than the current one, the updates drift in stale directions, and the
heatmaps never sharpen onto the keypoints. The loss is still printed and still moves, so
nothing flags it.

Thread: https://github.com/yastrebksv/TennisCourtDetector/issues/7
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

SIZE = 32
N_KPS = 4


class ConvBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.block = nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.BatchNorm2d(cout))

    def forward(self, x):
        return self.block(x)


class CourtNet(nn.Module):
    def __init__(self, out_channels=N_KPS):
        super().__init__()
        self.enc1 = nn.Sequential(ConvBlock(3, 16), ConvBlock(16, 16))
        self.pool1 = nn.MaxPool2d(2)
        self.enc2 = nn.Sequential(ConvBlock(16, 32), ConvBlock(32, 32))
        self.pool2 = nn.MaxPool2d(2)
        self.mid = ConvBlock(32, 32)
        self.ups1 = nn.Upsample(scale_factor=2)
        self.dec1 = ConvBlock(32, 32)
        self.ups2 = nn.Upsample(scale_factor=2)
        self.dec2 = ConvBlock(32, 16)
        self.head = nn.Conv2d(16, out_channels, 1)

    def forward(self, x):
        x = self.pool1(self.enc1(x))
        x = self.pool2(self.enc2(x))
        x = self.mid(x)
        x = self.dec1(self.ups1(x))
        x = self.dec2(self.ups2(x))
        return self.head(x)


class CourtDataset(Dataset):
    """Synthetic frames: each keypoint is a coloured dot on a noisy background."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.kps = torch.randint(3, SIZE - 3, (n, N_KPS, 2), generator=g)
        yy, xx = torch.meshgrid(torch.arange(SIZE), torch.arange(SIZE), indexing="ij")
        self.imgs = 0.3 * torch.randn(n, 3, SIZE, SIZE, generator=g)
        self.hms = torch.zeros(n, N_KPS, SIZE, SIZE)
        colours = torch.tensor([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [1.0, 1.0, 0]])
        for i in range(n):
            for k in range(N_KPS):
                y, x = self.kps[i, k]
                d2 = (yy - y) ** 2 + (xx - x) ** 2
                self.imgs[i] += colours[k].view(3, 1, 1) * torch.exp(-d2 / 2.0) * 2.0
                self.hms[i, k] = torch.exp(-d2 / (2 * 1.5 ** 2))

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, idx):
        return self.imgs[idx], self.hms[idx], self.kps[idx]


def train(model, train_loader, optimizer, criterion, device, epoch, max_iters=1000):
    model.train()
    losses = []
    max_iters = min(max_iters, len(train_loader))
    for iter_id, batch in enumerate(train_loader):
        out = model(batch[0].float().to(device))
        gt_hm = batch[1].float().to(device)
        loss = criterion(torch.sigmoid(out), gt_hm)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if iter_id + 1 >= max_iters:
            break
    return float(np.mean(losses))


@torch.no_grad()
def val(model, val_loader, criterion, device, max_dist=2.0):
    model.eval()
    losses, hits, total = [], 0, 0
    for imgs, hms, kps in val_loader:
        out = model(imgs.to(device))
        losses.append(criterion(torch.sigmoid(out), hms.to(device)).item())
        flat = out.flatten(2).argmax(-1)
        pred = torch.stack([flat // SIZE, flat % SIZE], -1)
        dist = (pred - kps).float().norm(dim=-1)
        hits += int((dist <= max_dist).sum())
        total += dist.numel()
    return float(np.mean(losses)), hits / total


def main():
    torch.manual_seed(0)
    device = "cpu"
    train_loader = DataLoader(CourtDataset(160, seed=1), batch_size=8, shuffle=True,
                              generator=torch.Generator().manual_seed(2))
    val_loader = DataLoader(CourtDataset(64, seed=3), batch_size=16)
    model = CourtNet().to(device)
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.999), weight_decay=0)
    for epoch in range(16):
        train_loss = train(model, train_loader, optimizer, criterion, device, epoch, max_iters=20)
        msg = f"epoch {epoch}  train loss {train_loss:.5f}"
        if epoch % 2 == 1:
            val_loss, acc = val(model, val_loader, criterion, device)
            msg += f"  val loss {val_loss:.5f}  keypoint accuracy {acc:.3f}"
        print(msg)


if __name__ == "__main__":
    main()
