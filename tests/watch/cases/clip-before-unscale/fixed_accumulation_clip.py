"""train_one_epoch(model, optimizer, scaler, loader) with fp16 autocast, a GradScaler and gradient
accumulation over 2 micro-batches; the fix: the accumulation block calls
scaler.unscale_(optimizer) once, after the last micro-batch, before clip_grad_norm_."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ACCUM = 2


def train_one_epoch(model, optimizer, scaler, loader, loss_fn, max_norm=5.0):
    model.train()
    for i, (x, y) in enumerate(loader):
        with torch.autocast("cpu", dtype=torch.float16):
            loss = loss_fn(model(x), y) / ACCUM
        scaler.scale(loss).backward()
        if (i + 1) % ACCUM == 0:
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_norm)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
    return loss.item() * ACCUM


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 3, 8, 8, generator=g)
    y = (x[:, 0].mean((1, 2)) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=g)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(16 * 16, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    loss = train_one_epoch(model, optimizer, scaler, loader, nn.CrossEntropyLoss())
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
