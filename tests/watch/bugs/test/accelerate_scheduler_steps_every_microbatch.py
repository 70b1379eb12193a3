"""Accelerate-style training loop with gradient accumulation: model, optimizer, loader and a cosine-with-warmup
LambdaLR are passed through accelerator.prepare(); the schedule is sized in optimizer steps
(num_training_steps = epochs * len(loader) // accum); each batch runs inside `with accelerator.accumulate(model):`
and calls accelerator.backward(loss), optimizer.step(), lr_scheduler.step(), optimizer.zero_grad().
The prepared optimizer only really steps when gradients are synced (every accum-th micro-batch), but the
prepared scheduler wrapper stepped its scheduler on every call, so the schedule ran accum (4) times too fast:
warmup ends after a quarter of its steps, the cosine reaches zero a quarter of the way in and then, past its
horizon, climbs back up, so the run ends at the peak lr instead of annealed. Fix (as merged in accelerate):
the wrapper steps the scheduler only when the optimizer actually stepped (gradients synced).
Thread: https://github.com/huggingface/accelerate/issues/963
"""
import contextlib
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, num_cycles=0.5):
    def lr_lambda(step):
        if step < num_warmup_steps:
            return step / max(1, num_warmup_steps)
        progress = (step - num_warmup_steps) / max(1, num_training_steps - num_warmup_steps)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * num_cycles * 2.0 * progress)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


# ----------------------------------------------------------------------------- tiny Accelerator stand-in
class GradientState:
    def __init__(self):
        self.sync_gradients = True


class AcceleratedOptimizer:
    def __init__(self, optimizer, state):
        self.optimizer, self.state = optimizer, state

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def step(self):
        if self.state.sync_gradients:
            self.optimizer.step()

    def zero_grad(self):
        if self.state.sync_gradients:
            self.optimizer.zero_grad()


class AcceleratedScheduler:
    def __init__(self, scheduler, optimizers, state):
        self.scheduler, self.optimizers, self.state = scheduler, optimizers, state

    def step(self, *args, **kwargs):
        self.scheduler.step(*args, **kwargs)          # steps on every micro-batch

    def get_last_lr(self):
        return self.scheduler.get_last_lr()


class Accelerator:
    def __init__(self, gradient_accumulation_steps=1):
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.gradient_state = GradientState()
        self.step = 0

    def prepare(self, model, optimizer, loader, scheduler):
        opt = AcceleratedOptimizer(optimizer, self.gradient_state)
        return model, opt, loader, AcceleratedScheduler(scheduler, [opt], self.gradient_state)

    @contextlib.contextmanager
    def accumulate(self, model):
        self.step += 1
        self.gradient_state.sync_gradients = self.step % self.gradient_accumulation_steps == 0
        yield

    def backward(self, loss):
        (loss / self.gradient_accumulation_steps).backward()


# ----------------------------------------------------------------------------- training
def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 20, generator=g)
    w = torch.randn(20, 1, generator=torch.Generator().manual_seed(0))
    y = torch.sin(x @ w / 20 ** 0.5 * 2) + 0.3 * torch.randn(n, 1, generator=g)      # noisy: a high lr cannot settle
    return torch.utils.data.TensorDataset(x, y)


def main():
    torch.manual_seed(0)
    epochs, accum, lr = 6, 4, 1e-2
    train_ds, val_ds = make_data(4096, 1), make_data(2048, 2)
    loader = torch.utils.data.DataLoader(train_ds, batch_size=16, shuffle=True,
                                         generator=torch.Generator().manual_seed(0))
    model = nn.Sequential(nn.Linear(20, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    num_update_steps = epochs * len(loader) // accum
    lr_scheduler = get_cosine_schedule_with_warmup(optimizer, num_warmup_steps=num_update_steps // 10,
                                                   num_training_steps=num_update_steps)

    accelerator = Accelerator(gradient_accumulation_steps=accum)
    model, optimizer, loader, lr_scheduler = accelerator.prepare(model, optimizer, loader, lr_scheduler)

    for epoch in range(epochs):
        model.train()
        for x, y in loader:
            with accelerator.accumulate(model):
                loss = F.mse_loss(model(x), y)
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
        model.eval()
        with torch.no_grad():
            val = F.mse_loss(model(val_ds.tensors[0]), val_ds.tensors[1]).item()
        print(f"epoch {epoch}  lr {optimizer.param_groups[0]['lr']:.2e}  last train loss {loss.item():.4f}  "
              f"val mse {val:.4f}")
    print(f"final lr {optimizer.param_groups[0]['lr']:.2e}  final val mse {val:.4f}")


if __name__ == "__main__":
    main()
