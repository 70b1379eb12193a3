"""Healthy look-alike of lr-decay-too-early: a per-batch CosineAnnealingLR whose T_max is the
run's total number of batches, so the learning rate reaches 0 only at the very last step."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(320, 8, generator=g)
    y = x @ torch.randn(8, 1, generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    epochs = 5
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * len(loader), eta_min=0.0)
    for epoch in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            optimizer.step()
            scheduler.step()
    print(f"loss {loss.item():.3f}, lr {optimizer.param_groups[0]['lr']:.1e}")


if __name__ == "__main__":
    main()
