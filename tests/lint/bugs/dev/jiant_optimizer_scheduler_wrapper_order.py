"""
Shape: library setup module + runner: OptimizerScheduler wrapper class holding .optimizer and .scheduler with its own step(); create_optimizer(model, ...) -> build_from_named_params builds transformers.AdamW param groups and get_linear_schedule_with_warmup and returns the wrapper; JiantRunner.run_train_step accumulates gradients through its complex_backpropagate method (delegating to a shared helper that calls backward) and then calls self.optimizer_scheduler.step() and .optimizer.zero_grad().
Bug: OptimizerScheduler.step() steps the scheduler before the optimizer.
Thread: https://github.com/jiant-dev/jiant-dev/pull/89
"""
import torch
import transformers

from jiant.proj.main.modeling.primary import wrap_jiant_forward
from jiant.shared.runner import complex_backpropagate


class OptimizerScheduler:
    def __init__(self, optimizer, scheduler):
        super().__init__()
        self.optimizer = optimizer
        self.scheduler = scheduler

    def step(self):
        self.scheduler.step()
        self.optimizer.step()

    def state_dict(self):
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, sd, strict=True):
        self.optimizer.load_state_dict(sd["optimizer"], strict=strict)
        self.scheduler.load_state_dict(sd["scheduler"], strict=strict)


def create_optimizer(model, lr, t_total, warmup_steps, warmup_frac,
                     eps=1e-8, opt_kind="adam"):
    return build_from_named_params(
        named_params=list(model.named_parameters()), lr=lr, t_total=t_total,
        warmup_steps=warmup_steps, warmup_frac=warmup_frac,
        eps=eps, opt_kind=opt_kind)


def build_from_named_params(named_params, lr, t_total, warmup_steps, warmup_frac,
                                 eps=1e-8, opt_kind="adam"):
    no_decay = ["bias", "LayerNorm.bias", "LayerNorm.weight"]
    trainable = [(n, p) for n, p in named_params if p.requires_grad]
    groups = [
        {"params": [p for n, p in trainable if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in trainable if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    if opt_kind == "adam":
        optimizer = transformers.AdamW(groups, lr=lr, eps=eps)
    else:
        raise KeyError(opt_kind)
    if warmup_steps is None:
        warmup_steps = warmup_frac * t_total
    scheduler = transformers.get_linear_schedule_with_warmup(
        optimizer, num_warmup_steps=warmup_steps, num_training_steps=t_total)
    return OptimizerScheduler(optimizer=optimizer, scheduler=scheduler)


class JiantRunner:
    def __init__(self, task_container, net, optimizer_scheduler, device, rparams):
        self.task_container = task_container
        self.net = net
        self.optimizer_scheduler = optimizer_scheduler
        self.device = device
        self.rparams = rparams

    def run_train_step(self, loaders_by_task, state):
        self.net.train()
        tname, task = self.task_container.task_sampler.pop()
        cfg = self.task_container.task_specific_configs[tname]

        total = 0
        for _ in range(cfg.gradient_accumulation_steps):
            batch, _meta = loaders_by_task[tname].pop()
            batch = batch.to(self.device)
            out = wrap_jiant_forward(jiant_model=self.net, batch=batch, task=task, compute_loss=True)
            loss = self.complex_backpropagate(loss=out.loss,
                                              accum_steps=cfg.gradient_accumulation_steps)
            total += loss.item()

        self.optimizer_scheduler.step()
        self.optimizer_scheduler.optimizer.zero_grad()
        state.step(task_name=tname)
        return total / cfg.gradient_accumulation_steps

    def complex_backpropagate(self, loss, accum_steps):
        return complex_backpropagate(
            loss=loss, optimizer=self.optimizer_scheduler.optimizer, model=self.net,
            fp16=self.rparams.fp16, n_gpu=self.rparams.n_gpu,
            gradient_accumulation_steps=accum_steps,
            max_grad_norm=self.rparams.max_grad_norm)
