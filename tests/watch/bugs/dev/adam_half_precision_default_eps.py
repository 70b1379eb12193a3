"""A small wide-residual CNN classifier trained entirely in half precision: the network is cast with
model.half(), the images are cast to float16, and a train(epoch) helper runs the usual zero_grad /
forward / cross-entropy / backward / step with torch.optim.Adam at its default eps=1e-8 (the same net
trains in half precision with SGD + Nesterov momentum). With fp16 parameters Adam keeps its state in
fp16 too: eps rounds to 0 and the squared-gradient average underflows to 0 for small gradients, so the
update divides by zero and NaN/inf appear in the weights after the first steps. Nothing raises.

Thread: https://discuss.pytorch.org/t/adam-half-precision-nans/1765
"""
import torch
import torch.nn.functional as F
from torch import nn


class WideBlock(nn.Module):
    def __init__(self, in_ch, out_ch, stride):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_ch)
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, 1, 1, bias=False)
        self.shortcut = nn.Conv2d(in_ch, out_ch, 1, stride, bias=False) if in_ch != out_ch or stride != 1 else None

    def forward(self, x):
        out = F.relu(self.bn1(x))
        skip = x if self.shortcut is None else self.shortcut(out)
        out = self.conv1(out)
        out = self.conv2(F.relu(self.bn2(out)))
        return out + skip


class WideResNet(nn.Module):
    def __init__(self, num_classes=10, width=1):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.blocks = nn.Sequential(WideBlock(16, 16 * width, 1), WideBlock(16 * width, 32 * width, 2))
        self.bn = nn.BatchNorm2d(32 * width)
        self.fc = nn.Linear(32 * width, num_classes)

    def forward(self, x):
        out = F.relu(self.bn(self.blocks(self.conv(x))))
        return self.fc(F.adaptive_avg_pool2d(out, 1).flatten(1))


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(10, 3, 8, 8, generator=torch.Generator().manual_seed(3))
    y = torch.randint(0, 10, (n,), generator=g)
    return protos[y] + torch.randn(n, 3, 8, 8, generator=g), y


def main():
    torch.manual_seed(0)
    x, y = make_data(1024, 0)
    xv, yv = make_data(256, 1)
    net = WideResNet().half()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)

    def train(epoch):
        net.train()
        perm = torch.randperm(len(x))
        for it, i in enumerate(range(0, len(x), 32)):
            idx = perm[i:i + 32]
            optimizer.zero_grad()
            out = net(x[idx].half())
            loss = F.cross_entropy(out.float(), y[idx])
            loss.backward()
            optimizer.step()
            if it % 8 == 0:
                print(f"epoch {epoch} iter {it} loss {loss.item():.4f}")

    def test(epoch):
        net.eval()
        with torch.no_grad():
            pred = net(xv.half()).argmax(1)
        print(f"epoch {epoch} val acc {(pred == yv).float().mean().item():.3f}")

    for epoch in range(3):
        train(epoch)
        test(epoch)


if __name__ == "__main__":
    main()
