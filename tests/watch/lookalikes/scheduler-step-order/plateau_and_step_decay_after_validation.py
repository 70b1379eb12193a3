"""Healthy look-alike of scheduler-step-order: two schedulers stepped once per epoch after the
validation loop, ReduceLROnPlateau on the validation loss (patience 0, so it cuts the rate after
any epoch that does not improve) and a StepLR. The learning rate changes between two updates at
most once per epoch, after the evaluation, never batch by batch."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def split(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 10, generator=g)
    return TensorDataset(x, x[:, :3].sum(dim=1, keepdim=True) + torch.randn(n, 1, generator=g))


def main():
    torch.manual_seed(0)
    train = DataLoader(split(480, 0), batch_size=32, shuffle=True)
    valid = DataLoader(split(320, 1), batch_size=32)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=0, factor=0.5)
    decay = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.9)
    for epoch in range(5):
        model.train()
        for x, y in train:
            loss = F.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val = sum(F.mse_loss(model(x), y).item() for x, y in valid) / len(valid)
        plateau.step(val)
        decay.step()
        print(f"epoch {epoch} val {val:.3f} lr {optimizer.param_groups[0]['lr']:.5f}")


if __name__ == "__main__":
    main()
