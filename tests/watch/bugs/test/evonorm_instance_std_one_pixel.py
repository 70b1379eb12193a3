"""A small CNN for a custom image set whose normalisation layers are EvoNorm B0 layers, replacing
BatchNorm + ReLU. B0 divides by max(batch std, v * x + instance_std(x)), and instance_std takes
torch.var over the spatial dimensions. After three stride-2 blocks the 8x8 input is 1x1, so the
variance of one pixel (with Bessel's correction) is NaN, torch.max passes the NaN on, and from the
first forward pass the outputs, the loss and every gradient are NaN. A fit(model, loader,
optimizer, epochs) helper trains it.

Thread: https://github.com/digantamisra98/EvoNorm/issues/4
"""
import torch
import torch.nn.functional as F
from torch import nn


def instance_std(x, eps=1e-5):
    var = torch.var(x, dim=(2, 3), keepdim=True).expand_as(x)
    return torch.sqrt(var + eps)


class EvoNormB0(nn.Module):
    """Batch-dependent EvoNorm: x / max(batch std, v * x + per-sample spatial std), then affine."""

    def __init__(self, channels, momentum=0.9, eps=1e-5):
        super().__init__()
        self.momentum, self.eps = momentum, eps
        self.gamma = nn.Parameter(torch.ones(1, channels, 1, 1))
        self.beta = nn.Parameter(torch.zeros(1, channels, 1, 1))
        self.v = nn.Parameter(torch.ones(1, channels, 1, 1))
        self.register_buffer("running_var", torch.ones(1, channels, 1, 1))

    def forward(self, x):
        if self.training:
            batch_var = x.var(dim=(0, 2, 3), unbiased=False, keepdim=True)
            with torch.no_grad():
                self.running_var.mul_(self.momentum).add_((1 - self.momentum) * batch_var)
        else:
            batch_var = self.running_var
        den = torch.max((batch_var + self.eps).sqrt(), self.v * x + instance_std(x, eps=self.eps))
        return x / den * self.gamma + self.beta


class SmallNet(nn.Module):
    def __init__(self, num_classes=6):
        super().__init__()
        self.blocks = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), EvoNormB0(16),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), EvoNormB0(32),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), EvoNormB0(64),
        )
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.fc(self.blocks(x).flatten(1))


def texture_images(n, num_classes=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(num_classes, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    y = torch.randint(0, num_classes, (n,), generator=g)
    return protos[y] + 0.8 * torch.randn(n, 3, 8, 8, generator=g), y


def fit(model, loader, optimizer, epochs):
    for epoch in range(epochs):
        model.train()
        correct = total = 0
        for i, (x, y) in enumerate(loader):
            out = model(x)
            loss = F.cross_entropy(out, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            correct += (out.argmax(1) == y).sum().item()
            total += y.numel()
            if i % 10 == 0:
                print(f"epoch {epoch} iter {i} loss {loss.item():.4f}")
        print(f"epoch {epoch} train acc {correct / total:.3f}")


def main():
    torch.manual_seed(0)
    x, y = texture_images(1600)
    loader = [(x[i:i + 64], y[i:i + 64]) for i in range(0, len(x), 64)]
    model = SmallNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    fit(model, loader, optimizer, epochs=3)


if __name__ == "__main__":
    main()
