"""A StepLR sized in epochs (step_size=3, gamma=0.1) is stepped inside the batch loop of
train_one_epoch(), so the learning rate is divided by 10 every 3 batches and is about zero long
before the run ends."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train_one_epoch(model, optimizer, scheduler, loader, loss_fn):
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    x = torch.randn(320, 8)
    y = x @ torch.randn(8, 1)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.1)
    for epoch in range(6):
        loss = train_one_epoch(model, optimizer, scheduler, loader, nn.MSELoss())
    print(f"loss {loss:.3f}, lr {optimizer.param_groups[0]['lr']:.1e}")


if __name__ == "__main__":
    main()
