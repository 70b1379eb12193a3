"""A regression script whose train_one_epoch(model, loader, optimizer) helper clears the gradients,
computes the loss, calls backward(), steps the optimizer and adds the loss to a running total."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train_one_epoch(model, loader, optimizer):
    model.train()
    total, seen = 0.0, 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(x)
        seen += len(x)
    return {"loss": total / seen}


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 8, generator=g)
    y = x[:, :2].sum(1, keepdim=True) + 0.1 * torch.randn(640, 1, generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(3):
        print(epoch, train_one_epoch(model, loader, optimizer))


if __name__ == "__main__":
    main()
