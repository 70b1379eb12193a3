"""A CausVid-style distillation trainer: a Trainer class builds a distillation model that holds a frozen
teacher denoiser and a generator initialised from it, and trains the generator to produce in one step
what the teacher's few-step sampler produces from the same noise (ODE-pair regression), with AdamW over
the generator's parameters. To save memory the trainer casts the whole distillation model with
self.model = self.model.to(dtype=torch.bfloat16) instead of keeping fp32 weights and running the
forward in bf16, so the parameters and AdamW's updates live in bfloat16: every update smaller than
half a bf16 rounding step of its weight (LayerNorm gains at 1.0 included) is rounded away, and the
generator barely moves from its start while the loop runs normally.

Thread: https://github.com/tianweiy/CausVid/issues/19
"""
import copy

import torch
import torch.nn.functional as F
from torch import nn


class Denoiser(nn.Module):
    def __init__(self, dim=32, hidden=256):
        super().__init__()
        self.inp = nn.Linear(dim + 1, hidden)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, hidden), nn.GELU()) for _ in range(3))
        self.out = nn.Linear(hidden, dim)

    def forward(self, noisy, t):
        h = self.inp(torch.cat([noisy, t[:, None].to(noisy.dtype)], 1))
        for block in self.blocks:
            h = h + block(h)
        return self.out(h)


class ODERegression(nn.Module):
    def __init__(self, teacher, denoising_step_list=(1.0, 0.75, 0.5, 0.25)):
        super().__init__()
        self.real_score = teacher.requires_grad_(False)
        self.generator = copy.deepcopy(teacher).requires_grad_(True)
        self.steps = denoising_step_list

    @torch.no_grad()
    def teacher_trajectory(self, noise):
        x = noise
        for i, t in enumerate(self.steps):
            x0 = self.real_score(x, torch.full((len(x),), t))
            t_next = self.steps[i + 1] if i + 1 < len(self.steps) else 0.0
            x = (1 - t_next) * x0 + t_next * noise
        return x

    def generator_loss(self, noise):
        target = self.teacher_trajectory(noise)
        pred = self.generator(noise, torch.full((len(noise),), self.steps[0], dtype=noise.dtype))
        return F.mse_loss(pred.float(), target.float())


class Trainer:
    def __init__(self, config):
        torch.manual_seed(config["seed"])
        teacher = Denoiser(config["dim"])
        self.model = ODERegression(teacher)
        self.dtype = torch.bfloat16 if config["mixed_precision"] else torch.float32
        self.model = self.model.to(dtype=torch.bfloat16)
        self.generator_optimizer = torch.optim.AdamW(
            [p for p in self.model.generator.parameters() if p.requires_grad],
            lr=config["lr"], betas=(config["beta1"], config["beta2"]), weight_decay=config["weight_decay"])
        self.config, self.step = config, 0

    def train_one_step(self):
        noise = torch.randn(self.config["batch_size"], self.config["dim"], dtype=torch.bfloat16)
        loss = self.model.generator_loss(noise)
        self.generator_optimizer.zero_grad()
        loss.backward()
        self.generator_optimizer.step()
        return loss.item()

    def train(self):
        start = [p.detach().clone() for p in self.model.generator.parameters()]
        while self.step < self.config["max_steps"]:
            loss = self.train_one_step()
            if self.step % 20 == 0:
                print(f"step {self.step} generator loss {loss:.5f}")
            self.step += 1
        moved = sum((p != s).sum().item() for p, s in zip(self.model.generator.parameters(), start))
        total = sum(p.numel() for p in start)
        print(f"generator weights changed: {moved}/{total}")


def main():
    config = dict(seed=0, dim=32, batch_size=64, lr=2e-5, beta1=0.0, beta2=0.999, weight_decay=0.01,
                  mixed_precision=True, max_steps=120)
    Trainer(config).train()


if __name__ == "__main__":
    main()
