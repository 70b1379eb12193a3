"""Healthy look-alike of same-batch-every-step: a trainer that validates every 10 steps by iterating
the validation loader, and then takes next(iter(val_loader)) once more for a fixed preview batch
whose predictions it prints. The preview is the same batch each time on purpose; each restart of
the loader gives that one batch, but never several times in a row between two steps, and the
validation itself walks every batch."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long())


@torch.no_grad()
def validate(model, val_loader):
    model.eval()
    correct = seen = 0
    for x, y in val_loader:
        correct += (model(x).argmax(1) == y).sum().item()
        seen += len(y)
    preview_x, preview_y = next(iter(val_loader))
    preview = model(preview_x[:4]).argmax(1).tolist()
    model.train()
    return correct / seen, preview, preview_y[:4].tolist()


def main():
    torch.manual_seed(0)
    train_loader = DataLoader(make_split(640, 0), batch_size=16, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(make_split(160, 1), batch_size=16)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    step = 0
    for _ in range(2):
        for x, y in train_loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 10 == 0:
                acc, preview, truth = validate(model, val_loader)
                print(f"step {step} val acc {acc:.3f} preview {preview} truth {truth}")


if __name__ == "__main__":
    main()
