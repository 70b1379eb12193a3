"""KBW082: the learning rate changes again and again between two optimizer updates
(scheduler-step-order).

The first param group's learning rate of the primary optimizer is read on every DataLoader batch
and before every step of that optimizer. Criterion: after its first step, between two of its steps
(or after the last one, up to the end of the run or of --steps and the evaluation pass after them)
the learning rate changed at least 3 times, twice or more between two reads with no backward()
between them (batches that train nothing: an evaluation loop). A scheduler stepped once per update
changes it once per gap, a per-epoch scheduler once per epoch; several changes in one gap mean the
schedule is advanced by batches that train nothing, typically validation batches going through the
same objective function that ticks a per-batch schedule, so warmup and decay drift away from the
plan.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, created_at

MIN_CHANGES = 3
MIN_EVALUATION_CHANGES = 2


class LearningRateMovesBetweenUpdates(Check):
    __doc__ = __doc__
    code = "KBW082"
    name = "learning-rate-moves-between-updates"
    entry = "scheduler-step-order"
    title = "the learning rate changes 3+ times between two optimizer updates, on batches that train nothing"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.last = None            # the learning rate last read
        self.last_backward = 0      # session.backward_calls at that read
        self.changes = self.evaluation_changes = 0
        self.worst = None           # (changes, evaluation changes, step, first lr, last lr, optimizer info)
        self.first_lr = None

    def _read(self):
        info = self.session.primary_info()
        opt = info.optimizer if info is not None else None
        if opt is None or not opt.param_groups or info.steps < 1:
            return None, info
        lr = opt.param_groups[0].get("lr")
        return (float(lr.item() if isinstance(lr, torch.Tensor) else lr) if lr is not None else None), info

    def _observe(self) -> None:
        lr, info = self._read()
        if lr is None:
            return
        if self.last is not None and lr != self.last:
            if self.changes == 0:
                self.first_lr = self.last
            self.changes += 1
            if self.session.backward_calls == self.last_backward:
                self.evaluation_changes += 1
        self.last, self.last_backward = lr, self.session.backward_calls
        if self.changes >= MIN_CHANGES and self.evaluation_changes >= MIN_EVALUATION_CHANGES and \
                (self.worst is None or self.changes > self.worst[0]):
            self.worst = (self.changes, self.evaluation_changes, self.session.step, self.first_lr, lr, info)

    def on_any_batch(self, loader, batch, serial):
        self._observe()

    def on_any_step_pre(self, optimizer):
        info = self.session.primary_info()
        if info is None or info.optimizer is not optimizer:
            return
        self._observe()
        self.changes = self.evaluation_changes = 0

    def on_end(self):
        self._observe()

    def findings(self) -> list:
        if self.worst is None:
            return []
        changes, evaluation, step, first, last, info = self.worst
        return [self.finding(
            f"after step {step} the learning rate of {info.cls} ({created_at('optimizer', info.site)}) changed "
            f"{changes} times before the next optimizer step ({first:.3g} -> {last:.3g}), {evaluation} of them on "
            f"batches with no backward(): a per-batch schedule is being advanced by batches that do not train (validation "
            f"batches through the same objective or hook); step the scheduler only after optimizer.step() in "
            f"training",
            where=info.site, step=step, evidence={"changes": changes, "evaluation_changes": evaluation,
                                                  "lr_before": first, "lr_after": last})]
