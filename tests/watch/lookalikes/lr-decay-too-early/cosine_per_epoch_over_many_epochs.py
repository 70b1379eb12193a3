"""A classifier trained for 150 short epochs with SGD and momentum, its learning rate annealed by a
CosineAnnealingLR over the epochs (T_max = 150, stepped once per epoch). The schedule reaches about
zero only in its last epoch: under `kb watch --steps` the later epochs run in brief, one batch each,
and that last epoch stands for one epoch of 150, not for a tenth of the steps watched."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    x = torch.randn(512, 10)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    epochs = 150
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    for epoch in range(epochs):
        total = 0.0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += loss.item()
        scheduler.step()
        if epoch % 25 == 0:
            print(f"epoch {epoch}: loss {total / len(loader):.4f}, lr {scheduler.get_last_lr()[0]:.2e}")


if __name__ == "__main__":
    main()
