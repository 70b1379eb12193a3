"""Healthy look-alike of train-eval-mode: an image generator trained with a perceptual loss. The loss
network (convolutions with BatchNorm and Dropout, its weights fixed as if pretrained) is put in
eval() once and run with grad enabled on every step, because the gradient has to pass through it
to the generator; it is in no optimizer and is never trained, so running it in eval mode is
exactly what is meant."""
import torch
import torch.nn.functional as F
from torch import nn


class LossNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.Dropout2d(0.2), nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU())

    def forward(self, x):
        return self.features(x)


def main():
    torch.manual_seed(0)
    loss_net = LossNetwork().eval()
    for p in loss_net.parameters():
        p.requires_grad_(False)
    generator = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1))
    optimizer = torch.optim.Adam(generator.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    targets = torch.rand(640, 3, 16, 16, generator=g)
    inputs = targets + 0.3 * torch.randn(640, 3, 16, 16, generator=g)
    for epoch in range(3):
        for i in range(0, 640, 32):
            out = generator(inputs[i:i + 32])
            loss = F.mse_loss(loss_net(out), loss_net(targets[i:i + 32])) + F.l1_loss(out, targets[i:i + 32])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
