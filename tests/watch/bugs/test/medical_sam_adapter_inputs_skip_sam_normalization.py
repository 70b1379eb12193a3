"""An adapter fine-tuning loop for a SAM-style model on medical masks with click prompts: a
train_sam(args, net, optimizer, train_loader, epoch) function runs the image encoder (pretrained
weights frozen, only parameters whose name contains "Adapter" train), encodes one positive click per
image with the prompt encoder, decodes a mask and trains it with BCEWithLogitsLoss; a
validation_sam() helper reports IoU and dice. The fixed encoder weights stand in for the SAM
checkpoint, whose first layer expects images on the 0-255 scale normalised by SAM's pixel mean and
std.

The bug: the dataset turns each image into a tensor the ToTensor way (values in [0, 1]) and the
training pipeline hands that straight to the image encoder, skipping SAM's preprocessing (scale to
0-255, subtract pixel_mean, divide by pixel_std). The pretrained encoder sees inputs on a scale and
offset it was never trained for, and the adapters fine-tune on top of features that no longer fit.

Thread: https://github.com/ImprintLab/Medical-SAM-Adapter/pull/135
"""
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

PIXEL_MEAN = torch.tensor([123.675, 116.28, 103.53]).reshape(1, 3, 1, 1)
PIXEL_STD = torch.tensor([58.395, 57.12, 57.375]).reshape(1, 3, 1, 1)


class Adapter(nn.Module):
    def __init__(self, dim, hidden=8):
        super().__init__()
        self.down = nn.Conv2d(dim, hidden, 1)
        self.up = nn.Conv2d(hidden, dim, 1)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, x):
        return x + self.up(F.gelu(self.down(x)))


class ImageEncoderViT(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, 4, stride=4)
        self.Space_Adapter = Adapter(dim)
        self.mlp = nn.Sequential(nn.Conv2d(dim, dim, 1), nn.GELU(), nn.Conv2d(dim, dim, 1))
        self.MLP_Adapter = Adapter(dim)
        self.load_checkpoint()

    def load_checkpoint(self):
        # deterministic "pretrained" weights: intensity and edge detectors tuned for normalised input
        g = torch.Generator().manual_seed(123)
        with torch.no_grad():
            w = torch.randn(self.patch_embed.weight.shape, generator=g) * 0.15
            w[:4] = 1.0 / 48
            self.patch_embed.weight.copy_(w)
            self.patch_embed.bias.copy_(torch.linspace(-1.0, 1.0, w.shape[0]))
            for m in self.mlp:
                if isinstance(m, nn.Conv2d):
                    m.weight.copy_(torch.randn(m.weight.shape, generator=g) * 0.3)
                    m.bias.zero_()

    def forward(self, x):
        h = F.gelu(self.patch_embed(x))
        h = self.Space_Adapter(h)
        h = h + self.mlp(h)
        return self.MLP_Adapter(h)


class PromptEncoder(nn.Module):
    def __init__(self, dim=16, grid=8, img_size=32):
        super().__init__()
        self.point_embed = nn.Parameter(torch.randn(dim) * 0.1)
        self.grid, self.scale = grid, grid / img_size

    def forward(self, points):
        coords, _labels = points
        yy, xx = torch.meshgrid(torch.arange(self.grid) + 0.5, torch.arange(self.grid) + 0.5, indexing="ij")
        px, py = coords[:, 0, 0] * self.scale, coords[:, 0, 1] * self.scale
        bump = torch.exp(-((xx - px[:, None, None]) ** 2 + (yy - py[:, None, None]) ** 2) / 2.0)
        return bump[:, None] * self.point_embed.reshape(1, -1, 1, 1)


class MaskDecoder(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.mix = nn.Sequential(nn.Conv2d(2 * dim, dim, 3, padding=1), nn.GELU())
        self.up = nn.ConvTranspose2d(dim, 8, 4, stride=4)
        self.out = nn.Conv2d(8, 1, 1)

    def forward(self, image_embeddings, dense_prompt_embeddings):
        h = self.mix(torch.cat([image_embeddings, dense_prompt_embeddings], 1))
        return self.out(F.gelu(self.up(h)))


class SamAdapterNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.image_encoder = ImageEncoderViT()
        self.prompt_encoder = PromptEncoder()
        self.mask_decoder = MaskDecoder()


class LesionDataset(Dataset):
    """Returns the image as ToTensor would (float in [0, 1]), a click inside the lesion and its mask."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
        self.items = []
        for _ in range(n):
            cy, cx = torch.randint(8, 24, (2,), generator=g).tolist()
            rad = 3 + 4 * torch.rand(1, generator=g).item()
            mask = (((yy - cy) ** 2 + (xx - cx) ** 2) < rad ** 2).float()
            raw = 110 + 25 * torch.randn(3, 32, 32, generator=g) + 45 * mask  # 0-255 scale
            image = raw.clamp(0, 255) / 255.0
            pt = torch.tensor([[float(cx), float(cy)]])
            self.items.append((image, pt, mask[None]))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def train_sam(args, net, optimizer, train_loader, epoch):
    lossfunc = nn.BCEWithLogitsLoss()
    net.train()
    epoch_loss = 0.0
    for imgs, pts, masks in train_loader:
        point_labels = torch.ones(imgs.shape[0], 1)
        imge = net.image_encoder(imgs)
        dense = net.prompt_encoder(points=(pts, point_labels))
        pred = net.mask_decoder(image_embeddings=imge, dense_prompt_embeddings=dense)
        loss = lossfunc(pred, masks)
        epoch_loss += loss.item()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return epoch_loss / len(train_loader)


def validation_sam(args, net, val_loader):
    net.eval()
    iou = dice = 0.0
    with torch.no_grad():
        for imgs, pts, masks in val_loader:
            dense = net.prompt_encoder(points=(pts, torch.ones(imgs.shape[0], 1)))
            pred = net.mask_decoder(net.image_encoder(imgs), dense).sigmoid() > args.threshold
            gt = masks > 0.5
            inter, union = (pred & gt).sum().item(), (pred | gt).sum().item()
            iou += inter / max(union, 1)
            dice += 2 * inter / max(pred.sum().item() + gt.sum().item(), 1)
    return iou / len(val_loader), dice / len(val_loader)


def main():
    torch.manual_seed(0)
    args = SimpleNamespace(lr=2e-3, epochs=8, b=8, threshold=0.5)
    net = SamAdapterNet()
    for n, value in net.image_encoder.named_parameters():
        if "Adapter" not in n:
            value.requires_grad = False
    optimizer = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=args.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.5)
    train_loader = DataLoader(LesionDataset(96, seed=1), batch_size=args.b, shuffle=True,
                              generator=torch.Generator().manual_seed(2))
    val_loader = DataLoader(LesionDataset(32, seed=3), batch_size=args.b, shuffle=False)
    for epoch in range(args.epochs):
        loss = train_sam(args, net, optimizer, train_loader, epoch)
        scheduler.step()
        iou, dice = validation_sam(args, net, val_loader)
        print(f"epoch {epoch} loss {loss:.4f} val IoU {iou:.3f} dice {dice:.3f}")


if __name__ == "__main__":
    main()
