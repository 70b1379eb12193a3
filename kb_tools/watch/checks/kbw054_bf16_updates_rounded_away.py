"""KBW054: bfloat16 weights without an fp32 copy: most updates round back to the old value.

Criterion: on at least 3 sampled steps, and on every sampled step that has them, the bfloat16
parameters the primary optimizer steps (up to 16 tensors, the first 4,096 values of each, only
values whose gradient is non-zero) change at step() for fewer than half of those values. bf16
keeps 8 significant bits, so a change below about 0.2-0.4% of a weight rounds away: with Adam
each step moves a weight by about lr, far less than that for weights of order 1. Parameters kept
in float32 (autocast, mixed precision with master weights) are not looked at.

Also per tensor, when the others move: one of those bf16 tensors, checked on at least 3 sampled
steps, of whose values that ever had a non-zero gradient (at least MIN_LIVE) fewer than half ever
changed at step() is reported by name. Weights of order 1 (embeddings, norm gains) stop at lr
around 1e-3 while the small weights of the linear layers still move, and the loss only plateaus
higher. Values that change now and then (an fp32 copy crossing a rounding boundary, stochastic
rounding) add up over the steps; an optimizer whose defaults name stochastic rounding or Kahan
summation is not judged per tensor.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, created_at, names, plural
from kb_tools.watch.checks.tensors import leading_values

MIN_STEPS = 3
MOVED = 0.5
ELEMENTS = 4096
MAX_TENSORS = 16
MIN_LIVE = 64  # values with a non-zero gradient a tensor needs to be judged alone


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
        self.per_tensor: dict = {}  # position among the checked tensors -> [name, steps, ever changed, ever live, first step]
        self.compensated = False    # the optimizer rounds stochastically or keeps Kahan sums

    def on_step_pre(self, optimizer):
        s = self.session
        self.before = []
        if s.optimizer_info(optimizer) is not s.primary_info():
            return
        self.compensated = any(k for k in optimizer.defaults if "stochastic" in k or "kahan" in k)
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
        for i, (p, values, mask) in enumerate(before):
            moved = (leading_values(p, ELEMENTS) != values) & mask
            changed += int(moved.sum())
            live += int(mask.sum())
            self._count_tensor(i, p, moved, mask)
        if live == 0:
            return
        share = changed / live
        self.calls += 1
        self.tensors = max(self.tensors, len(before))
        if share < MOVED:
            self.hits += 1
            self.first_step = self.session.step if self.first_step is None else self.first_step
            self.lowest = min(self.lowest, share)

    def _count_tensor(self, position: int, p, changed, live) -> None:
        """Adds one step's masks (values changed, values with a gradient) to the tensor's running union."""
        st = self.per_tensor.get(position)
        if st is None or st[2].shape != changed.shape:
            st = self.per_tensor[position] = [self.session.param_name(p), 0, changed.clone(), live.clone(),
                                              self.session.step]
        else:
            st[2] |= changed
            st[3] |= live
        st[1] += 1

    def on_end(self):
        self.before = []  # hold no parameter past the run

    def _stuck_tensors(self) -> list:
        """(name, share of its ever-live values that ever changed, steps, first step) of each tensor that
        stopped moving."""
        if self.compensated:
            return []
        out = []
        for name, steps, changed, live, first in self.per_tensor.values():
            alive, moved = int(live.sum()), int(changed.sum())
            if steps >= MIN_STEPS and alive >= MIN_LIVE and moved < MOVED * alive:
                out.append((name, moved / alive, steps, first))
        return out

    def findings(self) -> list:
        where = self.session.where()
        if self.hits < MIN_STEPS or self.hits < self.calls:
            stuck = self._stuck_tensors()
            if not stuck:
                return []
            first = min(st[3] for st in stuck)
            lowest = min(st[1] for st in stuck)
            steps = max(st[2] for st in stuck)
            message = (f"bfloat16 weights stepped by the {created_at('optimizer', where)} stopped moving: "
                       f"{names([st[0] for st in stuck])} changed at step() in as few as {lowest:.0%} of the values that "
                       f"had a non-zero gradient, over {plural(steps, 'sampled step')} from step "
                       f"{first}, while the other bf16 weights moved: bf16 keeps 8 significant bits, so "
                       f"an update below about 0.3% of a weight rounds away; keep float32 weights (with autocast for "
                       f"the bf16 compute) or an fp32 master copy, or use an optimizer with stochastic rounding or "
                       f"Kahan summation")
            return [self.finding(message, where=where, step=first, evidence={
                "stuck_tensors": [st[0] for st in stuck][:8], "lowest_share_ever_changed": round(lowest, 4),
                "sampled_steps": steps, "tensors_checked": self.tensors})]
        message = (f"the bfloat16 weights the {created_at('optimizer', where)} steps changed at step() for as few as "
                   f"{self.lowest:.0%} of the values that had a non-zero gradient, on {self.hits} of {self.hits} sampled "
                   f"steps from step {self.first_step}: bf16 keeps 8 significant bits, so an update below about 0.3% "
                   f"of a weight rounds away; keep float32 weights (with autocast for the bf16 compute) or an fp32 "
                   f"master copy, or use an optimizer with stochastic rounding or Kahan summation")
        return [self.finding(message, where=where, step=self.first_step, evidence={
            "lowest_share_changed": self.lowest, "sampled_steps": self.hits, "tensors_checked": self.tensors})]
