"""KBW014: the learning rate is about zero from the start.

Criterion: on at least 5 sampled steps and over at least 10 optimizer steps, every param group's
lr stayed below 1e-8, never higher at any sampled step (a warmup from 0 passes 1e-8 within its
first steps, and a decay from a real peak is KBW013's case). Each update then moves the weights
by a negligible fraction of their size, whatever the gradient.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, created_at, plural
from kb_tools.watch.checks.kbw013_lr_decayed_to_zero import _lrs

TINY = 1e-8
MIN_SAMPLES = 5
MIN_STEPS = 10


class LrNearZero(Check):
    __doc__ = __doc__
    code = "KBW014"
    name = "lr-near-zero"
    entry = "lr-too-low"
    title = "every param group's learning rate below 1e-8 from the first step on"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.state: dict[int, list] = {}  # id(optimizer) -> [samples, largest lr]

    def on_step_pre(self, optimizer):
        lrs = _lrs(optimizer)
        if lrs:
            st = self.state.setdefault(id(optimizer), [0, 0.0])
            st[0] += 1
            st[1] = max(st[1], max(lrs))

    def findings(self) -> list:
        s = self.session
        out = []
        for key, (samples, largest) in self.state.items():
            info = s.optimizers.get(key)
            if info is None or samples < MIN_SAMPLES or info.steps < MIN_STEPS or largest >= TINY:
                continue
            message = (f"every param group's learning rate stayed below 1e-08 (largest {largest:.3g}) over "
                       f"{plural(info.steps, 'optimizer step')} ({created_at('optimizer', info.site)}): the updates "
                       f"are negligible whatever the gradient; a useful lr is usually 1e-5 to 1")
            out.append(self.finding(message, where=info.site, step=0, evidence={
                "largest_lr": largest, "initial_lr": info.initial_lrs, "steps": info.steps, "sampled_steps": samples}))
        return out
