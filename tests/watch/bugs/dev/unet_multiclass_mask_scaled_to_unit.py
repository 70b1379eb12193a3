"""U-Net style multi-class segmentation whose class-id masks are rescaled like images.

Shape of the user's code: a train_net(net, device, epochs, batch_size, lr) function that builds a
BasicDataset (preprocess() turns HWC to CHW and rescales), random_split into train/val loaders,
RMSprop with momentum, CrossEntropyLoss when net.n_classes > 1 (BCEWithLogitsLoss otherwise),
masks cast to long in the loop, clip_grad_value_, and an eval_net() that reports validation
cross entropy. The masks store 4 classes as 1..4; the head was built with n_classes=3 and, to get
past the out-of-bounds assert, the mask was divided by its max like the image (0.25..1.0). The
long cast then turns classes 1-3 into 0 and class 4 into 1: training runs quietly, validation
cross entropy looks fine, yet the model only ever predicts one class for three of the four.
Thread: https://github.com/milesial/Pytorch-UNet/issues/174
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import Dataset, DataLoader, random_split

N_IMAGES = 96
SIZE = 16
PALETTE = torch.tensor([[0.9, 0.1, 0.1], [0.1, 0.8, 0.2], [0.2, 0.2, 0.9], [0.8, 0.8, 0.1]])


def make_pairs(n, gen):
    """Images in 0..255 and masks whose pixel values are class ids 1..4 (as saved in the PNGs)."""
    imgs, masks = [], []
    for _ in range(n):
        blocks = torch.randint(0, 4, (SIZE // 4, SIZE // 4), generator=gen)
        cls = blocks.repeat_interleave(4, 0).repeat_interleave(4, 1)           # H, W in 0..3
        img = PALETTE[cls] + 0.25 * torch.randn(SIZE, SIZE, 3, generator=gen)  # H, W, C
        imgs.append((img.clamp(0, 1) * 255).round())
        masks.append((cls + 1).unsqueeze(-1).float())                          # H, W, 1 in 1..4
    return imgs, masks


class BasicDataset(Dataset):
    def __init__(self, imgs, masks):
        self.imgs, self.masks = imgs, masks

    def __len__(self):
        return len(self.imgs)

    @classmethod
    def preprocess(cls, arr):
        chw = arr.permute(2, 0, 1)
        if chw.max() > 1:
            chw = chw / chw.max()   # user's edit: rescale by the max, for the mask as well
        return chw

    def __getitem__(self, i):
        return {'image': self.preprocess(self.imgs[i]), 'mask': self.preprocess(self.masks[i])}


class TinyUNet(nn.Module):
    def __init__(self, n_channels, n_classes):
        super().__init__()
        self.n_channels, self.n_classes = n_channels, n_classes
        self.inc = nn.Sequential(nn.Conv2d(n_channels, 16, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.down = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.dec = nn.Sequential(nn.Conv2d(32, 16, 3, padding=1), nn.ReLU())
        self.outc = nn.Conv2d(16, n_classes, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down(x1)
        x = self.dec(torch.cat([x1, self.up(x2)], dim=1))
        return self.outc(x)


def eval_net(net, loader, device):
    net.eval()
    tot = 0.0
    with torch.no_grad():
        for batch in loader:
            imgs = batch['image'].to(device=device, dtype=torch.float32)
            true_masks = batch['mask'].to(device=device, dtype=torch.long)[:, 0]
            tot += F.cross_entropy(net(imgs), true_masks).item()
    net.train()
    return tot / len(loader)


def train_net(net, device, dataset, epochs=6, batch_size=8, lr=0.001, val_percent=0.1):
    n_val = int(len(dataset) * val_percent)
    train, val = random_split(dataset, [len(dataset) - n_val, n_val],
                              generator=torch.Generator().manual_seed(0))
    train_loader = DataLoader(train, batch_size=batch_size, shuffle=True,
                              generator=torch.Generator().manual_seed(1))
    val_loader = DataLoader(val, batch_size=batch_size, shuffle=False, drop_last=True)

    optimizer = optim.RMSprop(net.parameters(), lr=lr, weight_decay=1e-8, momentum=0.9)
    criterion = nn.CrossEntropyLoss() if net.n_classes > 1 else nn.BCEWithLogitsLoss()

    for epoch in range(epochs):
        net.train()
        epoch_loss = 0.0
        for batch in train_loader:
            imgs = batch['image'].to(device=device, dtype=torch.float32)
            mask_type = torch.float32 if net.n_classes == 1 else torch.long
            true_masks = batch['mask'].to(device=device, dtype=mask_type)[:, 0]

            masks_pred = net(imgs)
            loss = criterion(masks_pred, true_masks)
            epoch_loss += loss.item()

            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_value_(net.parameters(), 0.1)
            optimizer.step()
        val_score = eval_net(net, val_loader, device)
        print(f'epoch {epoch + 1}/{epochs}  train loss {epoch_loss / len(train_loader):.4f}  '
              f'Validation cross entropy: {val_score:.4f}')
    return val_loader


def pixel_accuracy(net, imgs, masks):
    """Accuracy against the real 4 classes (mask value k means class index k - 1)."""
    net.eval()
    with torch.no_grad():
        x = torch.stack([BasicDataset.preprocess(i) for i in imgs])
        target = torch.stack([m[..., 0] for m in masks]).long() - 1
        pred = net(x).argmax(1)
    per_class = [round((pred[target == c] == c).float().mean().item(), 3) for c in range(4)]
    return (pred == target).float().mean().item(), per_class, sorted(pred.unique().tolist())


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    imgs, masks = make_pairs(N_IMAGES, gen)
    test_imgs, test_masks = make_pairs(24, gen)
    device = torch.device('cpu')

    net = TinyUNet(n_channels=3, n_classes=3)
    train_net(net, device, BasicDataset(imgs, masks))
    acc, per_class, used = pixel_accuracy(net, test_imgs, test_masks)
    print(f'test pixel accuracy over the 4 classes: {acc:.3f}  per class {per_class}  '
          f'predicted ids {used}')


if __name__ == "__main__":
    main()
