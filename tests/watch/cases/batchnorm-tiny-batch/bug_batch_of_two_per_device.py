"""A train() helper receiving the model and optimizer, over a DataLoader whose per-device batch
size was copied from a multi-GPU config (2 per device). The tabular MLP normalizes its hidden
layer with BatchNorm1d, which then sees two samples per forward: each feature becomes about +-1."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

PER_DEVICE_BATCH = 2


def make_model():
    return nn.Sequential(nn.Linear(12, 48), nn.BatchNorm1d(48), nn.ReLU(), nn.Linear(48, 1))


def zero_grads(optimizer):
    optimizer.zero_grad()


def train(model, optimizer, loader, criterion):
    model.train()
    for x, y in loader:
        zero_grads(optimizer)
        loss = criterion(model(x).squeeze(-1), y)
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 12, generator=g)
    y = x[:, :3].sum(1) + 0.1 * torch.randn(200, generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=PER_DEVICE_BATCH, shuffle=True)
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    print(f"loss {train(model, optimizer, loader, nn.MSELoss()):.3f}")


if __name__ == "__main__":
    main()
