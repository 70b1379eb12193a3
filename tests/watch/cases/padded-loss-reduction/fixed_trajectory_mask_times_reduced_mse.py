"""A GRU forecaster for pedestrian trajectories of 6-20 observed positions, batched with a
collate_fn that pads to the longest track and returns a validity mask. The MaskedMSE module
ignores the padded steps: its inner nn.MSELoss has reduction='none', so the mask zeroes each
padded position before the sum is divided by the number of real ones."""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Tracks(Dataset):
    def __init__(self, n=512, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            length = int(torch.randint(6, 21, (1,), generator=g))
            start, velocity = torch.randn(2, generator=g), 0.1 * torch.randn(2, generator=g)
            path = start + velocity * torch.arange(length + 1).unsqueeze(1).float()
            self.items.append((path[:-1], path[1:]))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def pad_collate(batch):
    width = max(len(x) for x, _ in batch)
    inputs = torch.zeros(len(batch), width, 2)
    targets = torch.zeros(len(batch), width, 2)
    mask = torch.zeros(len(batch), width, 1)
    for i, (x, y) in enumerate(batch):
        inputs[i, :len(x)], targets[i, :len(y)], mask[i, :len(x)] = x, y, 1.0
    return inputs, targets, mask


class MaskedMSE(nn.Module):
    def __init__(self):
        super().__init__()
        self.mse = nn.MSELoss(reduction="none")

    def forward(self, pred, target, mask):
        loss = self.mse(pred, target)
        return (loss * mask).sum() / mask.sum()


class Forecaster(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.gru = nn.GRU(2, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 2)

    def forward(self, x):
        return self.head(self.gru(x)[0])


def train_epoch(model, loader, criterion, optimizer):
    total = 0.0
    for inputs, targets, mask in loader:
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets, mask)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(loader)


def main():
    torch.manual_seed(0)
    loader = DataLoader(Tracks(), batch_size=16, shuffle=True, collate_fn=pad_collate)
    model = Forecaster()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(2):
        print(f"epoch {epoch} loss {train_epoch(model, loader, MaskedMSE(), optimizer):.4f}")


if __name__ == "__main__":
    main()
