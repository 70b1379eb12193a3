"""
Shape: an abstract PPO trainer class. The optimizer and LR scheduler are built by a create_optimizer_and_scheduler() method through helper factories and pushed through accelerate's prepare(); train() loops over global steps and calls step(), which gathers query batches from an endless loader, rolls out, then calls update_on_rollouts(). That method runs several PPO epochs over a rollouts DataLoader inside `with accelerator.accumulate(policy):`, calls accelerator.backward on the PPO loss, clips and records the grad norm only when accelerator.sync_gradients is set, then calls optimizer.step() and clears gradients.
Bug: the gradients are cleared with policy.zero_grad(set_to_none=True) on the wrapped model instead of the accelerate-wrapped optimizer. The AcceleratedOptimizer skips step()/zero_grad() on non-sync micro-steps, but the model's zero_grad runs on every micro-batch, so everything accumulated before the last micro-batch of each window is wiped before the real step.
Thread: https://github.com/tatsu-lab/alpaca_farm/pull/58
"""
import abc
from typing import Callable, Dict, Optional, Tuple

import torch
import tqdm
import transformers
from accelerate.optimizer import AcceleratedOptimizer
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from alpaca_farm import common, trainer_utils

START_STEP = 1


class PPOTrainerBase(object):
    def __init__(self, args, train_dataset, data_collator: Callable, policy: nn.Module,
                 ref_policy: nn.Module, reward_model: nn.Module,
                 tokenizer: transformers.PreTrainedTokenizer, accelerator,
                 optimizer: Optional[torch.optim.Optimizer] = None, lr_scheduler=None):
        self.args = args
        self.train_dataset = train_dataset
        self.data_collator = data_collator
        self.policy = policy
        self.ref_policy = ref_policy
        self.reward_model = reward_model
        self.tokenizer = tokenizer
        self.accelerator = accelerator
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.history = []

    @abc.abstractmethod
    def rollout(self, query_batches) -> Dict[str, torch.Tensor]:
        raise NotImplementedError

    @abc.abstractmethod
    def compute_loss(self, batch: Dict[str, torch.Tensor]) -> Tuple[torch.Tensor, Dict]:
        raise NotImplementedError

    def grad_norm(self):
        grads = [p.grad.norm(2) for p in self.policy.parameters() if p.requires_grad and p.grad is not None]
        return torch.stack(grads).norm(2)

    def rollouts_loader(self, rollouts):
        keys = tuple(rollouts.keys())
        ds = TensorDataset(*[rollouts[k] for k in keys])
        return DataLoader(ds, batch_size=self.args.step_per_device_batch_size, shuffle=True,
                          collate_fn=lambda items: {k: torch.stack(v) for k, v in zip(keys, zip(*items))})

    def update_on_rollouts(self, rollouts):
        assert isinstance(self.optimizer, AcceleratedOptimizer)
        loader = self.rollouts_loader(rollouts)
        collected = []
        for _ in range(self.args.noptepochs):
            for _, batch in tqdm.tqdm(enumerate(loader, 1), desc="gradstep"):
                with self.accelerator.accumulate(self.policy):
                    loss, stats = self.compute_loss(batch)
                    self.accelerator.backward(loss)
                    if self.accelerator.sync_gradients:
                        if self.args.clip_norm is not None:
                            self.accelerator.clip_grad_norm_(self.policy.parameters(), self.args.clip_norm)
                        stats["loss/grad_norm"] = self.grad_norm()
                        collected.append(stats)
                    self.optimizer.step()
                    self.policy.zero_grad(set_to_none=True)
        return common.merge_dict(collected, torch.stack)

    def step(self, query_stream, step_idx: int):
        query_batches = [next(query_stream) for _ in range(self.args.rollout_accumulation_steps)]
        rollouts = self.rollout(query_batches)
        stats = self.update_on_rollouts(rollouts)
        if self.lr_scheduler is not None:
            self.lr_scheduler.step()
        stats["step"] = step_idx
        return stats

    def create_optimizer_and_scheduler(self, n_steps: int):
        opt = trainer_utils.create_optimizer(args=self.args, model=self.policy, optimizer=self.optimizer)
        sched = trainer_utils.create_scheduler(args=self.args, optimizer=opt, lr_scheduler=self.lr_scheduler,
                                               num_training_steps=n_steps)
        self.optimizer, self.lr_scheduler = self.accelerator.prepare(opt, sched)
        return self.optimizer, self.lr_scheduler

    def endless_queries(self):
        loader = DataLoader(self.train_dataset, batch_size=self.args.rollout_per_device_batch_size,
                            collate_fn=self.data_collator, shuffle=True, drop_last=True)
        loader = self.accelerator.prepare(loader)
        while True:
            for batch in loader:
                yield batch

    def train(self):
        n_steps = len(self.train_dataset) * self.args.total_epochs // self.args.rollout_batch_size
        self.create_optimizer_and_scheduler(n_steps)
        stream = self.endless_queries()
        for step_idx in tqdm.tqdm(range(START_STEP, n_steps + START_STEP), desc="steps"):
            self.history.append(self.step(stream, step_idx))
        return self.history
