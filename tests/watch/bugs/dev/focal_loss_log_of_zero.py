"""A FocalLoss module that takes the softmax probability of the target class and then its plain
torch.log; once a confidently wrong prediction rounds that probability to exactly 0, the loss is
inf and the gradient NaN, and the weights become NaN.

Thread: https://github.com/mathiaszinnen/focal_loss_torch/issues/3
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class FocalLoss(nn.Module):
    def __init__(self, gamma=2.0, weights=None, reduction="mean"):
        super().__init__()
        self.gamma = gamma
        self.weights = weights
        self.reduction = reduction

    def forward(self, x, target):
        p = F.softmax(x, dim=-1)
        p_t = p.gather(1, target.unsqueeze(1)).squeeze(1)
        fl = -1 * (1 - p_t) ** self.gamma * torch.log(p_t)
        return fl.mean() if self.reduction == "mean" else fl.sum()


def train_epoch(model, loader, criterion, optimizer):
    model.train()
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(loader)


def main():
    g = torch.Generator().manual_seed(0)
    # raw, unscaled features (sensor counts) and 10% flipped labels
    x = torch.randn(2048, 20, generator=g) * 30
    y = (x[:, :5].sum(1) > 0).long() + 2 * (x[:, 5] > 0).long()
    flip = torch.rand(2048, generator=g) < 0.1
    y[flip] = torch.randint(0, 4, (int(flip.sum()),), generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(3):
        print(f"epoch {epoch} focal loss {train_epoch(model, loader, FocalLoss(), optimizer):.4f}")


if __name__ == "__main__":
    main()
