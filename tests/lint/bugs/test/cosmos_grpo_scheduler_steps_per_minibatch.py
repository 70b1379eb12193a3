"""
Shape: A GRPOTrainer class keeps self.optimizers / self.lr_schedulers (rebuilt lazily from the
controller's total_steps, counted in global steps); a command handler calls self.train() once per
global step, train() loops mu-iterations x mini-batches and every few mini-steps calls
self.execute_all_reduce(), a helper that reduces grads, clips, steps the optimizer, steps the
scheduler and zeroes grads.
Bug: the lr scheduler is stepped inside the per-mini-batch helper, so it ticks several times per
global step while its horizon is total global steps; warmup/decay run far too fast.
Thread: https://github.com/nvidia-cosmos/cosmos-rl/pull/207
"""
import os

import torch

from cosmos_rl.policy.trainer import Trainer
from cosmos_rl.policy.trainer.optm import build_lr_schedulers
from cosmos_rl.utils import distributed as dist_util


class GRPOTrainer(Trainer):

    def __init__(self, config, parallel_dims):
        super().__init__(config, parallel_dims)
        self.lr_schedulers = build_lr_schedulers(self.optimizers, self.config, 1e6)
        self.lr_schedulers_ready = False
        self.mini_batch = config.train.train_policy.mini_batch
        self.mu_iterations = config.train.train_policy.mu_iterations
        self.mini_step = 0

    def on_train_command(self, command):
        self.replica_batch_for_this_step = command.items_count
        if self.replica_batch_for_this_step == 0:
            return {}
        report = self.train(
            current_step=command.global_step,
            total_steps=command.total_steps,
        )
        if not self.lr_schedulers_ready:
            assert command.total_steps is not None and command.total_steps > 0
            self.lr_schedulers = build_lr_schedulers(
                self.optimizers, self.config, command.total_steps
            )
            self.lr_schedulers_ready = True
        return report

    def execute_all_reduce(self):
        with torch.cuda.stream(self.train_stream):
            for part in self.model_parts:
                if part is not None:
                    dist_util.gradient_reduce_across_dp_replicas_(
                        list(part.parameters()), self.inter_policy_nccl
                    )
            params = [p for m in self.model_parts if m is not None for p in m.parameters()]
            grad_norm = dist_util.gradient_norm_clipping(
                params,
                self.config.train.optm_grad_norm_clip,
                foreach=True,
            )
            self.optimizers.step()
            self.lr_schedulers.step()
            self.optimizers.zero_grad()
        return grad_norm

    def train(self, current_step, total_steps):
        samples, advantages = self.collect_rollouts()
        batch_size = len(samples)
        mb_size = min(self.mini_batch, batch_size) if self.mini_batch > 0 else batch_size
        n_minibatches = batch_size // mb_size
        reduce_every = int(os.environ.get("COSMOS_GRPO_STEP_INTERVAL", 10))

        loss_sum = 0.0
        loss_count = 0
        grad_norm_sum = 0.0
        self.model.train()
        for _ in range(self.mu_iterations):
            local_step = 0
            reduced = False
            for start in range(0, batch_size, mb_size):
                end = min(start + mb_size, batch_size)
                inputs = self.data_packer.policy_collate_fn(samples[start:end])
                inputs = {k: v.to(self.device) for k, v in inputs.items()}
                logits = self.model(**inputs)
                loss = self.compute_policy_loss(logits, inputs, advantages[start:end])
                loss = loss / n_minibatches
                loss.backward()
                loss_sum += loss.item()
                loss_count += 1

                self.mini_step += 1
                local_step += 1
                if local_step % reduce_every == 0 and local_step > 1:
                    reduced = True
                    grad_norm_sum += self.execute_all_reduce()
                else:
                    reduced = False
            if not reduced:
                grad_norm_sum += self.execute_all_reduce()

        return {
            "train/loss": loss_sum / max(loss_count, 1),
            "train/grad_norm": grad_norm_sum,
            "train/lr": self.lr_schedulers.get_last_lr()[0],
            "step": current_step,
        }
