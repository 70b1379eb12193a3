"""A point-cloud classifier trained and validated by train_step/valid_step functions that loop over
range(num_batches) and take each batch as next(iter(loader)); the validation loader does not shuffle,
so every validation batch is the loader's first batch and the logged validation accuracy comes from
the same 16 shapes every epoch (the shuffled training loader draws a fresh random batch each step
rather than walking the epoch).

Thread: https://github.com/wandb/examples/issues/444
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class PointNet(nn.Module):
    def __init__(self, num_classes=8):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(3, 32), nn.ReLU(), nn.Linear(32, 64), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, num_classes))

    def forward(self, pos):
        return self.head(self.mlp(pos).max(dim=1).values)


def train_step(epoch, model, optimizer, train_loader):
    model.train()
    epoch_loss, correct = 0.0, 0
    num_batches = len(train_loader)
    for _ in range(num_batches):
        pos, y = next(iter(train_loader))
        optimizer.zero_grad()
        prediction = model(pos)
        loss = F.cross_entropy(prediction, y)
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()
        correct += prediction.argmax(1).eq(y).sum().item()
    return epoch_loss / num_batches, correct / len(train_loader.dataset)


def valid_step(epoch, model, val_loader):
    model.eval()
    epoch_loss, correct, seen = 0.0, 0, 0
    num_batches = len(val_loader)
    with torch.no_grad():
        for _ in range(num_batches):
            pos, y = next(iter(val_loader))
            prediction = model(pos)
            epoch_loss += F.cross_entropy(prediction, y).item()
            correct += prediction.argmax(1).eq(y).sum().item()
            seen += len(y)
    return epoch_loss / num_batches, correct / seen


def shapes(n, seed, num_classes=8, points=64):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, num_classes, (n,), generator=g)
    scale = torch.stack([1 + (y % 2), 1 + (y // 2 % 2), 1 + (y // 4 % 2)], 1).float()
    pos = torch.randn(n, points, 3, generator=g) * scale.unsqueeze(1)
    return TensorDataset(pos, y)


def main():
    torch.manual_seed(0)
    train_loader = DataLoader(shapes(1024, 0), batch_size=16, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(shapes(256, 1), batch_size=16, shuffle=False)
    model = PointNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(1, 4):
        train_loss, train_acc = train_step(epoch, model, optimizer, train_loader)
        val_loss, val_acc = valid_step(epoch, model, val_loader)
        print(f"epoch {epoch} train loss {train_loss:.3f} acc {train_acc:.3f} val loss {val_loss:.3f} acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
