"""Healthy look-alike of scheduler-step-order: OneCycleLR planned in epochs on purpose,
total_steps = epochs + 1 (its floor comes after the last epoch) and stepped once at the end of
each epoch, so the learning rate warms up and anneals over the epochs of the run (coarser than
per batch, but a coherent schedule)."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(4)
    x = torch.randn(640, 12, generator=g)
    y = (x[:, :2].sum(dim=1) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    epochs = 5
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=epochs + 1)
    for epoch in range(epochs):
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()
        print(f"epoch {epoch} loss {loss.item():.3f} lr {scheduler.get_last_lr()[0]:.4f}")


if __name__ == "__main__":
    main()
