"""A binary segmentation network trained with BCE plus a soft Dice term: DiceLoss, an nn.Module
written from an old tutorial, turns the logits into probabilities with torch.sigmoid(logits), so the
Dice term trains the network beside BCE. The model and the criteria are passed into a
train(model, loader, criteria, optimizer) helper."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class DiceLoss(nn.Module):
    def __init__(self, smooth=1.0):
        super().__init__()
        self.smooth = smooth

    def forward(self, logits, target):
        probs = torch.sigmoid(logits)
        inter = (probs * target).sum(dim=(1, 2, 3))
        union = probs.sum(dim=(1, 2, 3)) + target.sum(dim=(1, 2, 3))
        return (1 - (2 * inter + self.smooth) / (union + self.smooth)).mean()


def train(model, loader, criteria, optimizer):
    bce, dice = criteria
    for images, masks in loader:
        logits = model(images)
        loss = bce(logits, masks) + dice(logits, masks)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    images = torch.randn(256, 1, 16, 16, generator=g)
    masks = (F.avg_pool2d(images, 3, stride=1, padding=1) > 0.2).float()
    loader = DataLoader(TensorDataset(images, masks), batch_size=16, shuffle=True, generator=g)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criteria = (nn.BCEWithLogitsLoss(), DiceLoss())
    for epoch in range(3):
        print(f"epoch {epoch} loss {train(model, loader, criteria, optimizer):.4f}")


if __name__ == "__main__":
    main()
