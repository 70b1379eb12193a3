"""The fixed twin of bug_resume_flag_loads_optimizer_before_onecycle.py: the OneCycleLR is built
before anything is loaded, and a resumed job loads the optimizer's and the scheduler's states after
it, so the cycle goes on from the step the first job stopped at."""
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
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=cfg["lr"], total_steps=cfg["total_steps"],
                                                    pct_start=0.3)
    start = 0
    if cfg["resume"]:
        ckpt = torch.load(cfg["resume"])
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        start = ckpt["step"]
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
