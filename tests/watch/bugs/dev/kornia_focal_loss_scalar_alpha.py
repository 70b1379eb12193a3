"""A small semantic-segmentation run with a library-style multi-class FocalLoss(alpha, gamma) module
(softmax over the class channel, one-hot target, -alpha * (1 - p)^gamma * log p summed over classes,
mean over pixels) driven by a train_one_epoch(model, loader, criterion, optimizer) helper, on masks
where background covers most pixels and two object classes are rare. alpha is meant to balance the
classes, but the loss multiplies every class by the same scalar alpha, which only rescales the loss:
the rare classes get no extra weight.

Thread: https://github.com/kornia/kornia/issues/875
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

NUM_CLASSES = 3


def focal_loss(input, target, alpha, gamma=2.0, reduction="none", eps=1e-8):
    input_soft = F.softmax(input, dim=1) + eps
    target_one_hot = F.one_hot(target, num_classes=input.shape[1]).permute(0, 3, 1, 2).float()
    weight = torch.pow(1.0 - input_soft, gamma)
    focal = -alpha * weight * torch.log(input_soft)
    loss_tmp = torch.sum(target_one_hot * focal, dim=1)
    if reduction == "mean":
        return loss_tmp.mean()
    if reduction == "sum":
        return loss_tmp.sum()
    return loss_tmp


class FocalLoss(nn.Module):
    def __init__(self, alpha, gamma=2.0, reduction="none"):
        super().__init__()
        self.alpha, self.gamma, self.reduction = alpha, gamma, reduction

    def forward(self, input, target):
        return focal_loss(input, target, self.alpha, self.gamma, self.reduction)


class SegNet(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())
        self.cls = nn.Conv2d(32, num_classes, 1)

    def forward(self, x):
        return self.cls(self.enc(x))


def masks(n, seed, size=24):
    g = torch.Generator().manual_seed(seed)
    imgs = 0.8 * torch.randn(n, 1, size, size, generator=g)
    target = torch.zeros(n, size, size, dtype=torch.long)
    for k in range(n):
        for cls, level, side in ((1, 0.6, 3), (2, -0.6, 2)):
            i, j = torch.randint(0, size - side, (2,), generator=g).tolist()
            target[k, i:i + side, j:j + side] = cls
            imgs[k, 0, i:i + side, j:j + side] += level
    return TensorDataset(imgs, target)


def train_one_epoch(model, loader, criterion, optimizer):
    model.train()
    for step, (images, target) in enumerate(loader):
        optimizer.zero_grad()
        loss = criterion(model(images), target)
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"  step {step} loss {loss.item():.4f}")


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    inter, union = torch.zeros(NUM_CLASSES), torch.zeros(NUM_CLASSES)
    for images, target in loader:
        pred = model(images).argmax(1)
        for c in range(NUM_CLASSES):
            inter[c] += ((pred == c) & (target == c)).sum()
            union[c] += ((pred == c) | (target == c)).sum()
    return (inter / union.clamp(min=1)).tolist()


def main():
    torch.manual_seed(0)
    model = SegNet()
    criterion = FocalLoss(alpha=0.25, gamma=2.0, reduction="mean")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train_loader = DataLoader(masks(1280, 0), batch_size=16, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(masks(256, 1), batch_size=64)
    for epoch in range(2):
        train_one_epoch(model, train_loader, criterion, optimizer)
        iou = evaluate(model, val_loader)
        print(f"epoch {epoch} IoU per class " + " ".join(f"{v:.3f}" for v in iou))


if __name__ == "__main__":
    main()
