"""A segmentation trainer configured through a manager object (mgr.max_epoch,
mgr.max_steps_per_epoch, mgr.initial_lr): _get_scheduler(optimizer, scheduler_type) builds a
warmup-then-cosine LambdaLR and passes max_steps=self.mgr.max_epoch as its horizon, while the
training loop steps the scheduler once per optimizer step. The cosine is therefore sized in epochs
but ticked per iteration: it reaches zero within the first epoch and then keeps swinging back up
and down to zero, instead of one decay across the run.

Thread: https://github.com/ScrollPrize/villa/pull/1495
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import LambdaLR


class ConfigManager:
    def __init__(self):
        self.max_epoch = 12
        self.max_steps_per_epoch = 25
        self.initial_lr = 3e-3
        self.scheduler = "diffusers_cosine_warmup"
        self.warmup_steps = 2


def cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, num_cycles=0.5):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress)))
    return LambdaLR(optimizer, lr_lambda)


class TinyUNet(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(1, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
        self.dec = nn.Sequential(nn.Conv2d(2 * c, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, 1, 1))

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        return self.dec(torch.cat([self.up(e2), e1], dim=1))


class BaseTrainer:
    def __init__(self, mgr):
        self.mgr = mgr

    def _get_scheduler(self, optimizer, scheduler_type):
        if scheduler_type == "diffusers_cosine_warmup":
            return cosine_schedule_with_warmup(optimizer, num_warmup_steps=self.mgr.warmup_steps,
                                               num_training_steps=self.mgr.max_epoch)
        raise ValueError(scheduler_type)

    def _batch(self, g):
        x = torch.rand(8, 1, 16, 16, generator=g)
        smooth = F.avg_pool2d(x, 3, stride=1, padding=1)
        y = (smooth > 0.5).float()
        return x, y

    def train(self):
        model = TinyUNet()
        optimizer = torch.optim.AdamW(model.parameters(), lr=self.mgr.initial_lr, weight_decay=1e-4)
        scheduler = self._get_scheduler(optimizer, self.mgr.scheduler)
        g = torch.Generator().manual_seed(0)
        global_step = 0
        for epoch in range(self.mgr.max_epoch):
            model.train()
            epoch_loss = 0.0
            lrs = []
            for _ in range(self.mgr.max_steps_per_epoch):
                x, y = self._batch(g)
                loss = F.binary_cross_entropy_with_logits(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                scheduler.step()
                lrs.append(optimizer.param_groups[0]["lr"])
                epoch_loss += loss.item()
                global_step += 1
            print(f"epoch {epoch} loss {epoch_loss / self.mgr.max_steps_per_epoch:.4f} "
                  f"lr min {min(lrs):.2e} max {max(lrs):.2e} (steps so far {global_step})")


def main():
    torch.manual_seed(0)
    BaseTrainer(ConfigManager()).train()


if __name__ == "__main__":
    main()
