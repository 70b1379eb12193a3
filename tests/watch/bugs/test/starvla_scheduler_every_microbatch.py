"""A vision-language-action trainer built on an accelerate-style helper: inside
`with accelerator.accumulate(model):` each micro-batch runs backward, the wrapped optimizer's
step() and zero_grad() only act when accelerator.sync_gradients is true (every
gradient_accumulation_steps micro-batches), but lr_scheduler.step() is called on every micro-batch.
The cosine-with-warmup schedule is sized in optimizer updates (max_train_steps), so it advances
gradient_accumulation_steps times too fast and reaches zero a quarter of the way through the run.

Thread: https://github.com/starVLA/starVLA/pull/210
"""
import math
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import LambdaLR


class Accelerator:
    def __init__(self, gradient_accumulation_steps=1):
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.step = 0
        self.sync_gradients = True

    @contextmanager
    def accumulate(self, model):
        self.step += 1
        self.sync_gradients = self.step % self.gradient_accumulation_steps == 0
        yield

    def backward(self, loss):
        (loss / self.gradient_accumulation_steps).backward()

    def clip_grad_norm_(self, params, max_norm):
        return nn.utils.clip_grad_norm_(params, max_norm)

    def prepare_optimizer(self, optimizer):
        return AcceleratedOptimizer(optimizer, self)


class AcceleratedOptimizer:
    def __init__(self, optimizer, accelerator):
        self.optimizer, self.accelerator = optimizer, accelerator

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def step(self):
        if self.accelerator.sync_gradients:
            self.optimizer.step()

    def zero_grad(self):
        if self.accelerator.sync_gradients:
            self.optimizer.zero_grad()


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(step):
        if step < num_warmup_steps:
            return step / max(1, num_warmup_steps)
        progress = (step - num_warmup_steps) / max(1, num_training_steps - num_warmup_steps)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))
    return LambdaLR(optimizer, lr_lambda)


class TinyVLA(nn.Module):
    def __init__(self, img_dim=32, vocab=40, dim=64, action_dim=7):
        super().__init__()
        self.vision = nn.Sequential(nn.Linear(img_dim, dim), nn.GELU())
        self.lang = nn.EmbeddingBag(vocab, dim)
        self.action_head = nn.Sequential(nn.Linear(2 * dim, dim), nn.GELU(), nn.Linear(dim, action_dim))

    def forward(self, image, instruction):
        return self.action_head(torch.cat([self.vision(image), self.lang(instruction)], dim=1))


class VLATrainer:
    def __init__(self, config, model, dataloader):
        self.config, self.model, self.dataloader = config, model, dataloader
        self.accelerator = Accelerator(config["gradient_accumulation_steps"])
        optimizer = torch.optim.AdamW(model.parameters(), lr=config["learning_rate"], weight_decay=0.01)
        self.lr_scheduler = get_cosine_schedule_with_warmup(optimizer, config["num_warmup_steps"],
                                                            config["max_train_steps"])
        self.optimizer = self.accelerator.prepare_optimizer(optimizer)
        self.completed_steps = 0

    def _train_step(self, batch):
        with self.accelerator.accumulate(self.model):
            pred = self.model(batch["image"], batch["instruction"])
            loss = F.mse_loss(pred, batch["action"])
            self.accelerator.backward(loss)
            if self.accelerator.sync_gradients:
                self.accelerator.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.lr_scheduler.step()
            self.optimizer.zero_grad()
        return loss.item()

    def train(self):
        self.model.train()
        for batch in self.dataloader:
            loss = self._train_step(batch)
            if self.accelerator.sync_gradients:
                self.completed_steps += 1
                if self.completed_steps % 10 == 0:
                    print(f"step {self.completed_steps}/{self.config['max_train_steps']} action loss {loss:.4f} "
                          f"lr {self.optimizer.param_groups[0]['lr']:.2e}")
            if self.completed_steps >= self.config["max_train_steps"]:
                break


def episodes(n_batches, batch_size=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    W_img = torch.randn(32, 7, generator=torch.Generator().manual_seed(1)) / 6
    task_dir = torch.randn(40, 7, generator=torch.Generator().manual_seed(2))
    out = []
    for _ in range(n_batches):
        image = torch.randn(batch_size, 32, generator=g)
        instruction = torch.randint(0, 40, (batch_size, 6), generator=g)
        action = image @ W_img + task_dir[instruction].mean(dim=1) * 2 + 0.05 * torch.randn(batch_size, 7, generator=g)
        out.append({"image": image, "instruction": instruction, "action": action})
    return out


def main():
    torch.manual_seed(0)
    config = {"gradient_accumulation_steps": 4, "learning_rate": 3e-3, "num_warmup_steps": 8, "max_train_steps": 80}
    dataloader = episodes(config["max_train_steps"] * config["gradient_accumulation_steps"])
    VLATrainer(config, TinyVLA(), dataloader).train()


if __name__ == "__main__":
    main()
