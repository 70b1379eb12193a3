"""An image-cropping ranker trained epoch by epoch with a test() function that calls net.eval() and
never switches back; training after the first evaluation runs in eval mode, so BatchNorm stops
estimating statistics and dropout stops regularising for the rest of the run.

Thread: https://github.com/HuiZeng/Grid-Anchor-based-Image-Cropping-Pytorch/issues/2
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class CropNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.MaxPool2d(2), nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16),
                                      nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.head = nn.Sequential(nn.Dropout(0.5), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, crops):
        return self.head(self.backbone(crops)).squeeze(-1)


def test(net, loader):
    net.eval()
    with torch.no_grad():
        err = sum(((net(x) - y) ** 2).mean().item() for x, y in loader) / len(loader)
    return err


def train(net, train_loader, test_loader, epochs):
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    net.train()
    for epoch in range(epochs):
        for crops, scores in train_loader:
            loss = nn.functional.smooth_l1_loss(net(crops), scores)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} train loss {loss.item():.4f} test mse {test(net, test_loader):.4f}")


def crops(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, 12, 12, generator=g) * 2 + 1
    y = x[:, 0, 3:9, 3:9].mean((1, 2)) - x[:, 1].mean((1, 2))  # well-composed crops score high
    return TensorDataset(x, y)


def main():
    torch.manual_seed(0)
    train_loader = DataLoader(crops(512, 0), batch_size=16, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    test_loader = DataLoader(crops(128, 1), batch_size=32)
    train(CropNet(), train_loader, test_loader, epochs=4)


if __name__ == "__main__":
    main()
