"""Healthy look-alike of params-not-in-optimizer: transfer learning with a frozen backbone. The
backbone's parameters are set requires_grad=False and left out of the optimizer, which holds the
new head only; the backbone gets no gradient and is meant not to change."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class FineTuner:
    def __init__(self, backbone, classes, lr=1e-2):
        for p in backbone.parameters():
            p.requires_grad_(False)
        self.model = nn.Sequential(backbone, nn.Linear(32, classes))
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.SGD(trainable, lr=lr, momentum=0.9)
        self.criterion = nn.CrossEntropyLoss()

    def step(self, x, y):
        self.optimizer.zero_grad()
        loss = self.criterion(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 16, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    backbone = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
    tuner = FineTuner(backbone, classes=3)
    for epoch in range(4):
        for xb, yb in DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g):
            loss = tuner.step(xb, yb)
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
