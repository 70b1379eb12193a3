"""Mixed-precision training (float16 autocast) with gradient accumulation (4 micro-batches per step)
through a GradScaler: the scaled loss is backpropagated per micro-batch, scaler.step() /
scaler.update() run once per window and optimizer.zero_grad() right after. The scaler starts at a
very high scale and grows it again after every 2 clean steps (growth_interval=2), so its windows
overflow now and then all through the run: scaler.step() skips optimizer.step(), the scale backs
off, and the zero_grad() that follows clears the overflowed gradients, as it must. Those windows
are thrown away on purpose, not by a misplaced zero_grad()."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ACCUMULATION = 4


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(20, 5, generator=g)
    x = torch.randn(640, 20, generator=g)
    y = (x @ w).argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.003, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 24, growth_interval=2)
    skipped = 0
    for epoch in range(6):
        for i, (xb, yb) in enumerate(loader):
            with torch.autocast("cpu", dtype=torch.float16):
                logits = model(xb)
            loss = F.cross_entropy(logits.float(), yb, reduction="sum") / ACCUMULATION
            scaler.scale(loss).backward()
            if (i + 1) % ACCUMULATION == 0:
                before = scaler.get_scale()
                scaler.step(optimizer)
                scaler.update()
                skipped += scaler.get_scale() < before
                optimizer.zero_grad()
        print(f"epoch {epoch} loss {loss.item() * ACCUMULATION / len(yb):.4f} scale {scaler.get_scale():g} skipped {skipped}")


if __name__ == "__main__":
    main()
