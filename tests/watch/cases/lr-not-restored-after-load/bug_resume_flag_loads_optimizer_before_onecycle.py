"""A script-style training run with a --resume flag: train(cfg) builds the model and AdamW, and when
cfg["resume"] names a checkpoint it loads the model and optimizer states right away, then builds the
OneCycleLR. The scheduler is created after the load, from the start of its cycle, so it writes its
first lr (max_lr / div_factor) over the lr the checkpoint restored: a job resumed half-way up the
cycle runs its next steps at a 25th of the peak and climbs the whole warmup again. The scheduler's
saved state is never read. Here the first job stops after 24 steps and the second resumes it."""
import os
import tempfile

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def get_model():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(16, 10))


def get_loader(seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (768,), generator=g)
    x = torch.randn(768, 1, 12, 12, generator=g) * 0.3
    x[torch.arange(768), 0, y, y] += 2.0
    return DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)


def train(cfg):
    model = get_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=0.05)
    start = 0
    if cfg["resume"]:
        ckpt = torch.load(cfg["resume"])
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        start = ckpt["step"]
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=cfg["lr"], total_steps=cfg["total_steps"],
                                                    pct_start=0.3)
    step = start
    for x, y in get_loader(cfg["seed"]):
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        step += 1
        if step == cfg["stop_at"]:
            break
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "step": step}, cfg["out"])
    return step


def main():
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "ckpt.pt")
        cfg = {"lr": 2e-3, "total_steps": 100, "resume": None, "seed": 0, "stop_at": 24, "out": out}
        step = train(cfg)
        step = train(dict(cfg, resume=out, seed=1, stop_at=None))
        print(f"finished at step {step}")


if __name__ == "__main__":
    main()
