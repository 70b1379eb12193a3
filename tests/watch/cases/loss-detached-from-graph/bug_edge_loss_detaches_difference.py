"""An image-restoration model trained with L1 plus an edge term: EdgeLoss, an nn.Module, takes
Sobel gradients of the prediction and of the target and returns the mean absolute difference of
the two, detached at the end to keep the target's edges out of the graph. The detach covers the
prediction's side too, so the edge term reaches the total loss as a constant: it is weighted and
logged every step and the model never learns from it. A Trainer class holds the criteria."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SOBEL = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]])


def sobel(img):
    kx = SOBEL.view(1, 1, 3, 3)
    ky = SOBEL.t().reshape(1, 1, 3, 3)
    return torch.cat([F.conv2d(img, kx, padding=1), F.conv2d(img, ky, padding=1)], 1)


class EdgeLoss(nn.Module):
    def forward(self, pred, target):
        return (sobel(pred) - sobel(target)).abs().mean().detach()


class Restorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 3, padding=1))

    def forward(self, x):
        return x + self.net(x)


class Trainer:
    def __init__(self, model, edge_weight=0.5):
        self.model, self.edge_weight = model, edge_weight
        self.l1, self.edge = nn.L1Loss(), EdgeLoss()
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train_step(self, blurred, sharp):
        pred = self.model(blurred)
        l1 = self.l1(pred, sharp)
        edge = self.edge(pred, sharp)
        loss = l1 + self.edge_weight * edge
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {"l1": l1.item(), "edge": edge.item()}


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    sharp = (torch.rand(320, 1, 16, 16, generator=g) > 0.7).float()
    blurred = F.avg_pool2d(sharp, 3, stride=1, padding=1)
    loader = DataLoader(TensorDataset(blurred, sharp), batch_size=16, shuffle=True, generator=g)
    trainer = Trainer(Restorer())
    for epoch in range(3):
        for xb, yb in loader:
            logs = trainer.train_step(xb, yb)
        print(f"epoch {epoch} l1 {logs['l1']:.4f} edge {logs['edge']:.4f}")


if __name__ == "__main__":
    main()
