"""
Shape: an RL post-training framework with factory helpers and a backend class: build_optimizer(config, *, params, backend=None) returns AdamW (or a backend override) and build_lr_scheduler(config, *, optimizer, backend=None) turns a typed LrSchedulerConfig(type, warmup_steps, total_steps) into a constant / linear-warmup LambdaLR / CosineAnnealingLR; FSDPBackend.__init__ builds the optimizer and scheduler from those factories; FSDPBackend.optimizer_step(max_grad_norm) clips, skips on a non-finite norm, then steps the optimizer, the scheduler and the EMA; TrainStack.train_step runs micro-batches through the algorithm's compute_loss_and_backward and calls optimizer_step once per step, for total_steps steps.
Bug: the "cosine" branch builds CosineAnnealingLR(T_max=total_steps - warmup_steps) with no warmup at all; stepped once per optimizer step for total_steps steps, it reaches zero warmup_steps before training ends and then climbs back up.
Thread: https://github.com/Tencent-Hunyuan/UniRL/pull/223
"""
import math
from dataclasses import dataclass

import torch


@dataclass
class LrSchedulerConfig:
    type: str
    warmup_steps: int
    total_steps: int


def build_optimizer(config, *, params, backend=None):
    if backend is not None:
        override = backend.build_optimizer(config)
        if override is not None:
            return override
    trainable = [p for p in params if p.requires_grad]
    return torch.optim.AdamW(trainable, lr=float(config.learning_rate),
                             betas=(float(config.adam_beta1), float(config.adam_beta2)),
                             eps=float(config.adam_epsilon), weight_decay=float(config.weight_decay),
                             foreach=False)


def build_lr_scheduler(config, *, optimizer, backend=None):
    if backend is not None:
        override = backend.build_scheduler(config, optimizer)
        if override is not None:
            return override
    kind = str(config.type)
    n_warm = int(config.warmup_steps)
    n_total = int(config.total_steps)

    if kind == "constant":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    if kind == "linear":
        def lr_lambda(step):
            if step < n_warm:
                return step / max(1, n_warm)
            return max(0.0, 1.0 - (step - n_warm) / (n_total - n_warm))
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    if kind == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=n_total - n_warm,
                                                          eta_min=0)
    return None


class FSDPBackend:
    def __init__(self, model, optimizer_cfg, scheduler_cfg, ema=None):
        self.model = model
        self.ema = ema
        self.optimizer = build_optimizer(optimizer_cfg, params=list(model.parameters()))
        self.scheduler = build_lr_scheduler(scheduler_cfg, optimizer=self.optimizer)
        self._optimizer_step_count = 0

    def zero_grad(self):
        self.optimizer.zero_grad()

    def optimizer_step(self, *, max_grad_norm):
        params = [p for p in self.model.parameters() if p.requires_grad]
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, float(max_grad_norm)))
        if not math.isfinite(grad_norm):
            self.optimizer.zero_grad(set_to_none=True)
            return grad_norm
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        if self.ema is not None:
            self.ema.step(self._optimizer_step_count)
        self._optimizer_step_count += 1
        return grad_norm


class TrainStack:
    def __init__(self, algorithm, fsdp_backend, max_grad_norm):
        self.algorithm = algorithm
        self.fsdp_backend = fsdp_backend
        self.max_grad_norm = max_grad_norm

    def train_step(self, batch, micro_slices, training_progress):
        self.fsdp_backend.zero_grad()
        has_backward = False
        total_loss = 0.0
        for start, end in micro_slices:
            result = self.algorithm.compute_loss_and_backward(batch.slice(start, end),
                                                             training_progress=training_progress,
                                                             loss_scale=1.0 / len(micro_slices))
            total_loss += result.loss
            has_backward = has_backward or result.has_backward
        grad_norm = 0.0
        if has_backward:
            grad_norm = self.fsdp_backend.optimizer_step(max_grad_norm=self.max_grad_norm)
        lr = self.fsdp_backend.optimizer.param_groups[0]["lr"]
        return total_loss, grad_norm, lr
