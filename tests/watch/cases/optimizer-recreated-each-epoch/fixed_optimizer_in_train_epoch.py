"""A train_epoch(model, optimizer, loader) helper; the fix: the Adam optimizer is built once in
main() and passed in, so its moments carry over from one epoch to the next."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train_epoch(model, optimizer, loader):
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
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(8):
        loss = train_epoch(model, optimizer, loader)
    print(f"loss {loss:.4f}")


if __name__ == "__main__":
    main()
