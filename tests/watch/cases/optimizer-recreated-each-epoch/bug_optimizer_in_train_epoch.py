"""A train_epoch(model, loader, lr) helper that builds its own Adam optimizer each time it is
called, once per epoch: every epoch starts from empty Adam moments (and bias correction from
step 1 again), so the optimizer state is thrown away each epoch."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train_epoch(model, loader, lr):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.MSELoss()
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 10, generator=g)
    y = torch.sin(x[:, :1]) + 0.1 * x[:, 1:2]
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1))
    for epoch in range(8):
        loss = train_epoch(model, loader, lr=3e-3)
    print(f"loss {loss:.4f}")


if __name__ == "__main__":
    main()
