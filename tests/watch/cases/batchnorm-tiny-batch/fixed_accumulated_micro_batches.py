"""A segmentation-style Trainer fits only 2 images per forward, so it accumulates gradients over
8 micro-batches of 2 to reach an effective batch of 16. The fix normalizes with GroupNorm, whose
statistics come from each image alone and do not depend on the micro-batch."""
import torch
import torch.nn.functional as F
from torch import nn


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(4, cout), nn.ReLU())


class SegNet(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.encoder = nn.Sequential(block(3, 16), block(16, 16))
        self.head = nn.Conv2d(16, classes, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


class Trainer:
    def __init__(self, model, micro_batch=2, accumulate=8):
        self.model, self.micro_batch, self.accumulate = model, micro_batch, accumulate
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def clear(self):
        self.optimizer.zero_grad(set_to_none=True)

    def step(self, images, masks):
        self.clear()
        for i in range(0, len(images), self.micro_batch):
            logits = self.model(images[i:i + self.micro_batch])
            loss = F.cross_entropy(logits, masks[i:i + self.micro_batch]) / self.accumulate
            loss.backward()
        self.optimizer.step()
        return loss.item() * self.accumulate


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    images = torch.randn(160, 3, 16, 16, generator=g)
    masks = (images[:, 0] > 0).long() + (images[:, 1] > 0.5).long()
    trainer = Trainer(SegNet())
    for epoch in range(6):
        for i in range(0, 160, 16):
            loss = trainer.step(images[i:i + 16], masks[i:i + 16])
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
