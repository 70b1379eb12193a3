"""A linear probe on a small pretrained CNN: the backbone's parameters get requires_grad=False and
only the new head is given to the optimizer, but the loop calls model.train() at the top of each
epoch, which puts the backbone's BatchNorm layers back in training mode: their running statistics
follow the probe's batches while the weights stay frozen."""
import torch
from torch import nn


def make_backbone():
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.BatchNorm2d(32), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten())


class Probe(nn.Module):
    def __init__(self, backbone, num_classes=5):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.head(self.backbone(x))


def freeze(module):
    for p in module.parameters():
        p.requires_grad = False


def fit(model, optimizer, batches, epochs=3):
    for epoch in range(epochs):
        model.train()
        for x, y in batches:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


def main():
    torch.manual_seed(0)
    backbone = make_backbone()
    freeze(backbone)
    model = Probe(backbone)
    optimizer = torch.optim.SGD(model.head.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    x = 2.0 + 3.0 * torch.randn(320, 3, 12, 12, generator=g)
    y = torch.randint(0, 5, (320,), generator=g)
    batches = [(x[i:i + 16], y[i:i + 16]) for i in range(0, 320, 16)]
    fit(model, optimizer, batches)


if __name__ == "__main__":
    main()
