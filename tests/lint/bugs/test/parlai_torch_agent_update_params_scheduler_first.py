"""
Shape: a dialogue-research framework's TorchAgent base class: init_optim builds the optimizer from opt flags and build_lr_scheduler creates a LambdaLR warmup scheduler plus an inverse-square-root LambdaLR keyed on the update count; backward(loss) handles gradient accumulation with update_freq, zero_grad() skips zeroing mid-accumulation, and update_params() counts updates, ticks the schedulers, clips and steps; a concrete ranker agent's train_step(batch) calls zero_grad, computes a cross-entropy over candidate scores, then backward and update_params.
Bug: update_params() ticks warmup_scheduler.step(...) and scheduler.step(...) before self.optimizer.step(), so every update uses the next schedule value and the first warmup value is never applied (the order torch warns about).
Thread: https://github.com/facebookresearch/ParlAI/pull/2105
"""
import math

import torch
import torch.nn.functional as F
from torch import optim

from parlai.core.agents import Agent


class TorchAgent(Agent):
    def __init__(self, opt, shared=None):
        super().__init__(opt, shared)
        self.opt = opt
        self._number_training_updates = 0
        self._number_grad_accum = 0
        self.model = None

    def init_optim(self, params):
        lr = self.opt["learningrate"]
        if self.opt.get("optimizer", "adam") == "sgd":
            self.optimizer = optim.SGD(params, lr=lr, momentum=self.opt.get("momentum", 0.0))
        else:
            self.optimizer = optim.Adam(params, lr=lr, betas=(0.9, 0.98))
        self.build_lr_scheduler()

    def _is_lr_warming_up(self):
        return self.opt.get("warmup_updates", -1) > 0 and \
            self._number_training_updates <= self.opt["warmup_updates"]

    def build_lr_scheduler(self):
        warmup = self.opt.get("warmup_updates", -1)
        if warmup > 0:
            rate = self.opt.get("warmup_rate", 1e-4)

            def _warm(step):
                return rate + (1.0 - rate) * min(step / warmup, 1.0)
            self.warmup_scheduler = optim.lr_scheduler.LambdaLR(self.optimizer, _warm)
        if self.opt.get("lr_scheduler") == "invsqrt":
            decay_from = max(warmup, 1)

            def _invsqrt(step):
                return math.sqrt(decay_from) / math.sqrt(max(step, decay_from))
            self.scheduler = optim.lr_scheduler.LambdaLR(self.optimizer, _invsqrt)

    def backward(self, loss):
        freq = self.opt.get("update_freq", 1)
        if freq > 1:
            loss = loss / freq
        loss.backward()

    def update_params(self):
        freq = self.opt.get("update_freq", 1)
        if freq > 1:
            self._number_grad_accum = (self._number_grad_accum + 1) % freq
            if self._number_grad_accum != 0:
                return
        self._number_training_updates += 1
        if self.opt.get("warmup_updates", -1) > 0 and self._is_lr_warming_up():
            self.warmup_scheduler.step(epoch=self._number_training_updates)
        if self.opt.get("lr_scheduler") == "invsqrt" and not self._is_lr_warming_up():
            self.scheduler.step(self._number_training_updates)
        if self.opt.get("gradient_clip", -1) > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.opt["gradient_clip"])
        self.optimizer.step()

    def zero_grad(self):
        if self._number_grad_accum != 0:
            return
        self.optimizer.zero_grad()


class RankerAgent(TorchAgent):
    def __init__(self, opt, model, shared=None):
        super().__init__(opt, shared)
        self.model = model
        self.init_optim([p for p in self.model.parameters() if p.requires_grad])

    def score_candidates(self, batch):
        ctx = self.model.encode_context(batch["text_vec"])
        cands = self.model.encode_candidates(batch["label_vec"])
        return ctx @ cands.t()

    def train_step(self, batch):
        self.model.train()
        self.zero_grad()
        scores = self.score_candidates(batch)
        target = torch.arange(scores.size(0), device=scores.device)
        loss = F.cross_entropy(scores, target)
        self.backward(loss)
        self.update_params()
        return {"loss": loss.item(), "lr": self.optimizer.param_groups[0]["lr"]}
