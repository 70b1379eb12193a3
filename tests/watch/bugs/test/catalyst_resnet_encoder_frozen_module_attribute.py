"""A library-style ResnetEncoder(arch, pretrained, frozen=True, pooling, cut_layers) wrapped by a
Net with a new one-logit head, trained with Adam over model.parameters() and BCEWithLogitsLoss.
The encoder "freezes" its pretrained stages by writing layer.requires_grad = False on each child
module; that only stores a Python attribute on the module, every parameter keeps
requires_grad=True, and Adam keeps rewriting the supposedly frozen pretrained encoder.

Thread: https://github.com/catalyst-team/catalyst/issues/79
"""
import torch
from torch import nn


def tiny_resnet(pretrained=True):
    # stands in for torchvision's resnet: stem, stages, global pool, fc; the seeded init plays
    # the part of the downloaded checkpoint
    gen = torch.Generator().manual_seed(1234 if pretrained else 0)
    net = nn.Sequential()
    net.add_module("conv1", nn.Conv2d(3, 16, 3, padding=1))
    net.add_module("relu", nn.ReLU())
    net.add_module("layer1", nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU()))
    net.add_module("layer2", nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU()))
    net.add_module("avgpool", nn.AdaptiveAvgPool2d(1))
    net.add_module("fc", nn.Linear(32, 1000))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * (2.0 / max(p[0].numel(), 1)) ** 0.5)
    return net


class ResnetEncoder(nn.Module):
    def __init__(self, arch="resnet18", pretrained=True, frozen=True, pooling=None, cut_layers=2):
        super().__init__()
        resnet = tiny_resnet(pretrained=pretrained)
        modules = list(resnet.children())[:-cut_layers]
        if frozen:
            for layer in modules:
                layer.requires_grad = False
        modules += [nn.AdaptiveAvgPool2d(1) if pooling is None else pooling, nn.Flatten()]
        self.out_features = 32
        self.feature_net = nn.Sequential(*modules)

    def forward(self, image):
        return self.feature_net(image)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = ResnetEncoder(arch="resnet18", pooling=None)
        self.logits = nn.Linear(self.enc.out_features, 1)

    def forward(self, x):
        return self.logits(self.enc(x))


def make_batches(n_batches, batch_size, seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n_batches):
        y = torch.randint(0, 2, (batch_size, 1), generator=g).float()
        x = torch.randn(batch_size, 3, 16, 16, generator=g)
        x[:, 0, :8, :8] += 1.5 * (2 * y.view(-1, 1, 1) - 1)
        out.append((x, y))
    return out


def main():
    torch.manual_seed(0)
    model = Net()
    first_conv = model.enc.feature_net[0].weight
    old_value = first_conv.detach().clone()
    optimizer = torch.optim.Adam(model.parameters())
    criterion = torch.nn.BCEWithLogitsLoss()
    for epoch in range(4):
        total = 0.0
        for inputs, targets in make_batches(20, 16, seed=epoch):
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch} loss {total / 20:.4f}")
    moved = (first_conv.detach() - old_value).norm() / old_value.norm()
    print(f"frozen encoder first conv moved by {moved.item():.3f} (relative)")


if __name__ == "__main__":
    main()
