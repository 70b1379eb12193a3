"""KBW054: bfloat16 weights without an fp32 copy: most updates round back to the old value.

Criterion: on at least 3 sampled steps, and on every sampled step that has them, the bfloat16
parameters the primary optimizer steps (up to 16 tensors, the first 4,096 values of each, only
values whose gradient is non-zero) change at step() for fewer than half of those values. bf16
keeps 8 significant bits, so a change below about 0.2-0.4% of a weight rounds away: with Adam
each step moves a weight by about lr, far less than that for weights of order 1. Parameters kept
in float32 (autocast, mixed precision with master weights) are not looked at.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, created_at
from kb_tools.watch.checks.tensors import leading_values

MIN_STEPS = 3
MOVED = 0.5
ELEMENTS = 4096
MAX_TENSORS = 16


class Bf16UpdatesRoundedAway(Check):
    __doc__ = __doc__
    code = "KBW054"
    name = "bf16-updates-rounded-away"
    entry = "bf16-weight-update-underflow"
    title = "bfloat16 parameters whose optimizer updates mostly round back to the old value"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.before: list = []  # (param, values, non-zero-gradient mask) around the primary optimizer's step
        self.calls = self.hits = 0
        self.first_step = None
        self.lowest = 1.0
        self.tensors = 0

    def on_step_pre(self, optimizer):
        s = self.session
        self.before = []
        if s.optimizer_info(optimizer) is not s.primary_info():
            return
        for p in s.params_of(optimizer):
            if p.dtype == torch.bfloat16 and p.grad is not None and p.numel() > 0:
                grad = leading_values(p.grad, ELEMENTS)
                self.before.append((p, leading_values(p, ELEMENTS).clone(), grad != 0))
                if len(self.before) >= MAX_TENSORS:
                    break

    def on_step_post(self, optimizer):
        before, self.before = self.before, []
        if not before:
            return
        changed = live = 0
        for p, values, mask in before:
            now = leading_values(p, ELEMENTS)
            changed += int(((now != values) & mask).sum())
            live += int(mask.sum())
        if live == 0:
            return
        share = changed / live
        self.calls += 1
        self.tensors = max(self.tensors, len(before))
        if share < MOVED:
            self.hits += 1
            self.first_step = self.session.step if self.first_step is None else self.first_step
            self.lowest = min(self.lowest, share)

    def on_end(self):
        self.before = []  # hold no parameter past the run

    def findings(self) -> list:
        if self.hits < MIN_STEPS or self.hits < self.calls:
            return []
        where = self.session.where()
        message = (f"the bfloat16 weights the {created_at('optimizer', where)} steps changed at step() for as few as "
                   f"{self.lowest:.0%} of the values that had a non-zero gradient, on {self.hits} of {self.hits} sampled "
                   f"steps from step {self.first_step}: bf16 keeps 8 significant bits, so an update below about 0.3% "
                   f"of a weight rounds away; keep float32 weights (with autocast for the bf16 compute) or an fp32 "
                   f"master copy, or use an optimizer with stochastic rounding or Kahan summation")
        return [self.finding(message, where=where, step=self.first_step, evidence={
            "lowest_share_changed": self.lowest, "sampled_steps": self.hits, "tensors_checked": self.tensors})]
