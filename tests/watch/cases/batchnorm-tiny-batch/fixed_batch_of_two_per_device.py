"""A train() helper receiving the model and optimizer, over a DataLoader on one device. The fix
sets the per-device batch to 32 samples, so the BatchNorm1d in the tabular MLP normalizes with
statistics over 32 samples."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

PER_DEVICE_BATCH = 32


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
    x = torch.randn(1600, 12, generator=g)
    y = x[:, :3].sum(1) + 0.1 * torch.randn(1600, generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=PER_DEVICE_BATCH, shuffle=True)
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    print(f"loss {train(model, optimizer, loader, nn.MSELoss()):.3f}")


if __name__ == "__main__":
    main()
