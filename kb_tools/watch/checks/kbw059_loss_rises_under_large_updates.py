"""KBW059: the training loss climbs in the first steps, and stays up, while a step moves the
weights by more than their own size: the learning rate is above the stability limit.

Criterion, within the first 30 steps, at the first training loss site (grad enabled, one value
per call; when a step calls it more than once, its first call of the step): some sampled step s
has a loss at least 4 x the loss of step 0 (or a non-finite one, step 0's being finite and above
1e-3); the last such loss up to step 30 is still above step 0's (or non-finite): the climb did
not come back down; and on at least one sampled step (up to step 30, weights still finite) the
primary optimizer's step changed its weight matrices (parameters of 2 or more dimensions with a
gradient, at most 16, non-zero before the step) by ||w_after - w_before|| / ||w_before|| >= 1
for the lower median of them; and the learning rate did not rise between step 0 and s (a warmup
or a learning-rate range test raises it on purpose).
Measured on the healthy real scripts: that median stayed below 0.55 on every sampled step but in
one tutorial whose loss climbed 15x in five steps at SGD lr 0.5 and was below its start again by
step 7, which the "stays up" clause leaves alone. An optimizer-comparison tutorial, BERT's first
steps and a Siamese net climbed 4x or more with medians under 0.08.
"""
from __future__ import annotations

import math

from kb_tools.watch.checks import Check, loss_where, plural
from kb_tools.watch.checks.tensors import leading_values

WITHIN_STEPS = 30
RISE = 4.0
MIN_FIRST = 1e-3
RATIO = 1.0
MAX_TENSORS = 16
ELEMENTS = 65536


class _Loss:
    __slots__ = ("key", "site", "where", "first", "lr_first", "step", "peak", "peak_step", "lr_peak", "last")

    def __init__(self, key, site, where, first, lr):
        self.key, self.site, self.where, self.first, self.lr_first = key, site, where, first, lr
        self.step = 0                      # the step of the last value taken
        self.peak = self.peak_step = self.lr_peak = None   # the first climb to RISE x (or non-finite)
        self.last = first                  # the last value taken, up to WITHIN_STEPS


def _finite_or_inf(value: float) -> float:
    return value if math.isfinite(value) else math.inf


class LossRisesUnderLargeUpdates(Check):
    __doc__ = __doc__
    code = "KBW059"
    name = "loss-rises-under-large-updates"
    entry = "lr-too-high"
    title = "loss 4x its first value within 30 steps, still up, after a step larger than the weights"
    confidence = 0.92  # above KBW006: a non-finite loss after such a climb is the learning rate's doing

    def __init__(self, session):
        super().__init__(session)
        self.loss: _Loss | None = None
        self.before: list = []
        self.large: list = []   # [(step, lower-median ratio)] of the sampled steps at or above RATIO

    def on_loss(self, call):
        s = self.session
        if not call.grad_enabled or s.step > WITHIN_STEPS:
            return
        out = call.output
        if out is None or out.numel() != 1 or not out.dtype.is_floating_point:
            return
        key = (call.kind, call.site)
        loss = self.loss
        if loss is None:
            if s.step == 0:
                value = float(out.detach())
                if math.isfinite(value) and value > MIN_FIRST:
                    self.loss = _Loss(key, call.site, loss_where(call), value, s.primary_lr())
            return
        if key != loss.key or s.step <= loss.step:
            return
        loss.step, loss.last = s.step, _finite_or_inf(float(out.detach()))
        if loss.peak is None and loss.last >= RISE * loss.first:
            loss.peak, loss.peak_step, loss.lr_peak = loss.last, s.step, s.primary_lr()

    def on_step_pre(self, optimizer):
        s = self.session
        self.before = []
        if s.step > WITHIN_STEPS or s.optimizer_info(optimizer) is not s.primary_info():
            return
        for p in s.params_of(optimizer):
            if p.dim() >= 2 and p.grad is not None and p.is_floating_point():
                values = leading_values(p, ELEMENTS)
                norm = float(values.float().norm())
                if math.isfinite(norm) and norm > 0:
                    self.before.append((p, values.clone(), norm))
                    if len(self.before) >= MAX_TENSORS:
                        break

    def on_step_post(self, optimizer):
        before, self.before = self.before, []
        if not before:
            return
        ratios = sorted(_finite_or_inf(float((leading_values(p, ELEMENTS).float() - values.float()).norm())) / norm
                        for p, values, norm in before)
        median = ratios[(len(ratios) - 1) // 2]
        if RATIO <= median < math.inf:  # a non-finite update is a NaN gradient's (KBW006), not the step size
            self.large.append((self.session.step, median))

    def on_end(self):
        self.before = []  # hold no parameter past the run

    def findings(self) -> list:
        loss = self.loss
        large = self.large
        if loss is None or loss.peak is None or loss.last <= loss.first or not large:
            return []
        if loss.lr_first is not None and loss.lr_peak is not None and loss.lr_peak > loss.lr_first * 1.01:
            return []
        biggest = max(r for _, r in large)
        peak = f"{loss.peak:.4g}" if math.isfinite(loss.peak) else "non-finite"
        last = f", still {loss.last:.4g} at step {loss.step}" if math.isfinite(loss.last) and loss.step > loss.peak_step else ""
        lr = f" at lr {loss.lr_first:.3g}" if loss.lr_first is not None else ""
        message = (f"the training loss went from {loss.first:.4g} at step 0 to {peak} at step {loss.peak_step}{last} "
                   f"({loss.where}), after optimizer steps{lr} that changed the weight matrices by up to {biggest:.3g} "
                   f"times their size (the median over the matrices), on {plural(len(large), 'sampled step')} from "
                   f"step {large[0][0]}: each step overshoots; lower the learning rate 3-10x, or warm it up")
        return [self.finding(message, where=loss.site, step=loss.peak_step, evidence={
            "first_loss": loss.first, "peak_loss": loss.peak, "peak_step": loss.peak_step,
            "last_loss": loss.last, "last_step": loss.step,
            "large_update_steps": [step for step, _ in large], "largest_update_ratio": biggest,
            "lr": loss.lr_first})]
