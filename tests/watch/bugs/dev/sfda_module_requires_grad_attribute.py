"""A source-free adaptation Trainer class that means to freeze the segmentation head by writing
self.model.outc.requires_grad = False on the module; that only stores a Python attribute, the
head's parameters keep requires_grad=True and Adam over model.parameters() keeps moving them.

Thread: https://github.com/CSCYQJ/MICCAI23-ProtoContra-SFDA/issues/18
"""
import torch
import torch.nn.functional as F
from torch import nn


class TinyUNet(nn.Module):
    def __init__(self, in_ch=1, n_classes=3, width=8):
        super().__init__()
        self.inc = nn.Sequential(nn.Conv2d(in_ch, width, 3, padding=1), nn.ReLU())
        self.down = nn.Sequential(nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
        self.outc = nn.Conv2d(2 * width, n_classes, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.up(self.down(x1))
        return self.outc(torch.cat([x1, x2], dim=1))


class Trainer:
    def __init__(self, model, lr=1e-3):
        self.model = model
        self.model.outc.requires_grad = False  # keep the source classifier fixed
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.head_before = self.model.outc.weight.detach().clone()

    def entropy_loss(self, logits):
        p = F.softmax(logits, dim=1)
        return -(p * F.log_softmax(logits, dim=1)).sum(1).mean()

    def adapt_step(self, images):
        self.model.train()
        logits = self.model(images)
        loss = self.entropy_loss(logits)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def fit(self, target_batches):
        for it, images in enumerate(target_batches):
            loss = self.adapt_step(images)
            if it % 20 == 0:
                print(f"iter {it} entropy {loss:.4f}")
        moved = (self.model.outc.weight - self.head_before).norm() / self.head_before.norm()
        print(f"relative change of the 'frozen' head: {moved.item():.3f}")


def target_batches(steps, g):
    for _ in range(steps):
        yield torch.randn(8, 1, 32, 32, generator=g) * 0.5 + 0.2


def main():
    torch.manual_seed(0)
    Trainer(TinyUNet()).fit(target_batches(80, torch.Generator().manual_seed(0)))


if __name__ == "__main__":
    main()
