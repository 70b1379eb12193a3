"""A multi-task image network with five outputs (one segmentation mask scored with a Dice loss and four
scalar point regressions scored with MSE) whose five losses are combined by an AutomaticWeightedLoss
module: one learnable weight per task, loss_i * 0.5 / w_i**2 + log(1 + w_i**2), all started at 1. A
train(model, awl, optimizer, loader) helper runs the loop. The optimizer is built from
model.parameters() only, so the loss module's weights get gradients on every backward but are never
updated: every task weight is still exactly 1 at the end and the "automatic" weighting is a fixed
equal weighting.

Thread: https://github.com/Mikoto10032/AutomaticWeightedLoss/issues/3
"""
import torch
import torch.nn.functional as F
from torch import nn

RES = 24


class AutomaticWeightedLoss(nn.Module):
    def __init__(self, num):
        super().__init__()
        self.params = nn.Parameter(torch.ones(num))

    def forward(self, *losses):
        total = 0.0
        for w, loss in zip(self.params, losses):
            total = total + 0.5 / w ** 2 * loss + torch.log(1 + w ** 2)
        return total


def dice_loss(logits, target, eps=1.0):
    p = torch.sigmoid(logits)
    inter = (p * target).sum((1, 2, 3))
    return 1 - ((2 * inter + eps) / (p.sum((1, 2, 3)) + target.sum((1, 2, 3)) + eps)).mean()


class MultiTaskNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.seg_head = nn.Conv2d(16, 1, 1)
        self.point_head = nn.Sequential(nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(256, 64),
                                        nn.ReLU(), nn.Linear(64, 4))

    def forward(self, x):
        f = self.encoder(x)
        return self.seg_head(f), self.point_head(f)


def make_loader(n_batches, bs, g):
    yy, xx = torch.meshgrid(torch.arange(RES).float(), torch.arange(RES).float(), indexing="ij")
    loader = []
    for _ in range(n_batches):
        c = torch.rand(bs, 2, generator=g) * 12 + 6
        r = torch.rand(bs, generator=g) * 3 + 2
        level = torch.rand(bs, generator=g) * 0.5 + 0.5
        mask = (((yy - c[:, 0, None, None]) ** 2 + (xx - c[:, 1, None, None]) ** 2)
                < r[:, None, None] ** 2).float()[:, None]
        img = mask * level[:, None, None, None] + 0.1 * torch.randn(bs, 1, RES, RES, generator=g)
        points = torch.stack([c[:, 0] / RES, c[:, 1] / RES, r / 5, level], 1)
        loader.append((img, mask, points))
    return loader


def train(model, awl, optimizer, loader, epochs):
    step = 0
    for epoch in range(epochs):
        for img, mask, points in loader:
            seg, pts = model(img)
            losses = [dice_loss(seg, mask)] + [F.mse_loss(pts[:, i], points[:, i]) for i in range(4)]
            loss = awl(*losses)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 15 == 0:
                print(f"step {step} total {loss.item():.4f} dice {losses[0].item():.4f} "
                      f"weights {[round(w, 4) for w in awl.params.tolist()]}")
            step += 1


def main():
    torch.manual_seed(0)
    loader = make_loader(20, 16, torch.Generator().manual_seed(0))
    model = MultiTaskNet()
    awl = AutomaticWeightedLoss(5)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train(model, awl, optimizer, loader, epochs=4)


if __name__ == "__main__":
    main()
