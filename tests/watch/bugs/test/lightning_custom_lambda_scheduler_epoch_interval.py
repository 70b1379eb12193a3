"""A LightningModule driven by an experiment config object (peak_lr, betas, eps, weight_decay,
warmup_steps, num_training_steps, last_lr): configure_optimizers() builds Adam from the config and a
LambdaLR with linear warmup then cosine decay, both sized in optimizer steps, and returns it as
{"optimizer": ..., "lr_scheduler": {"scheduler": ..., "name": "custom_scheduler"}}. A small
Lightning-style Trainer honours the scheduler dict's "interval" key, whose default is "epoch". With
no "interval": "step" in the dict the per-step schedule is ticked once per epoch: the learning rate
is 0 for the whole first epoch and then creeps up by one warmup tick per epoch, so the model
trains at a tiny fraction of peak_lr.

Thread: https://github.com/Lightning-AI/pytorch-lightning/issues/19534
"""
import math
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class ClassifierModule(nn.Module):
    def __init__(self, exp_cfg):
        super().__init__()
        self.exp_cfg = exp_cfg
        self.model = nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(),
                                   nn.Linear(128, 8))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.model(x), y)

    def configure_optimizers(self):
        cfg = self.exp_cfg
        optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.peak_lr, betas=(cfg.beta_1, cfg.beta_2),
                                     eps=cfg.eps, weight_decay=cfg.weight_decay)

        def get_scheduler(optimizer, num_training_steps, warmup_steps, peak_lr, last_lr):
            def lr_lambda(current_step):
                if current_step < warmup_steps:
                    return current_step / warmup_steps
                progress = (current_step - warmup_steps) / (num_training_steps - warmup_steps)
                cosine = 0.5 * (1 + math.cos(math.pi * progress))
                return (last_lr + (peak_lr - last_lr) * cosine) / peak_lr
            return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)

        scheduler = get_scheduler(optimizer, cfg.num_training_steps, cfg.warmup_steps, cfg.peak_lr, cfg.last_lr)
        lr_scheduler = {"scheduler": scheduler, "name": "custom_scheduler"}
        return {"optimizer": optimizer, "lr_scheduler": lr_scheduler}


class Trainer:
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs
        self.global_step = 0

    def fit(self, module, train_dataloader):
        conf = module.configure_optimizers()
        optimizer = conf["optimizer"]
        sched_cfg = {"interval": "epoch", "frequency": 1, **conf["lr_scheduler"]}
        scheduler = sched_cfg["scheduler"]
        for epoch in range(self.max_epochs):
            module.train()
            for batch_idx, batch in enumerate(train_dataloader):
                loss = module.training_step(batch, batch_idx)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                self.global_step += 1
                if sched_cfg["interval"] == "step" and self.global_step % sched_cfg["frequency"] == 0:
                    scheduler.step()
                if self.global_step % 20 == 0:
                    print(f"step {self.global_step} loss {loss.item():.4f} "
                          f"{sched_cfg['name']} {optimizer.param_groups[0]['lr']:.2e}")
            if sched_cfg["interval"] == "epoch" and (epoch + 1) % sched_cfg["frequency"] == 0:
                scheduler.step()


def make_loader(n=1920, batch_size=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(32, 8, generator=torch.Generator().manual_seed(3))
    x = torch.randn(n, 32, generator=g)
    y = (torch.tanh(x @ w) + 0.3 * torch.randn(n, 8, generator=g)).argmax(1)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True,
                      generator=torch.Generator().manual_seed(seed))


def main():
    torch.manual_seed(0)
    loader = make_loader()
    max_epochs = 6
    total = max_epochs * len(loader)
    exp_cfg = SimpleNamespace(peak_lr=1e-3, beta_1=0.9, beta_2=0.98, eps=1e-8, weight_decay=0.01,
                              num_training_steps=total, warmup_steps=total // 10, last_lr=1e-5)
    Trainer(max_epochs).fit(ClassifierModule(exp_cfg), loader)


if __name__ == "__main__":
    main()
