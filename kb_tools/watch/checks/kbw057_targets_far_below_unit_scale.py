"""KBW057: regression targets far below unit scale, and the model never gets under their variance.

Criterion: at one mse_loss site, on every sampled call (at least 5, with at least 2 targets each),
the targets' standard deviation is at most 1e-3, the loss is at least 10 times the targets'
variance on the first call, and it is still above that variance (R^2 below 0) on every call:
the untrained model's own output noise dwarfs the targets, the absolute loss looks tiny, and
the network has learned nothing about them. Targets on a unit scale are never reported.
"""
from __future__ import annotations

import math

from kb_tools.watch.checks import Check, loss_where
from kb_tools.watch.checks.tensors import mse_target_stats

MIN_CALLS = 5
MAX_STD = 1e-3
FIRST_RATIO = 10.0


class TargetsFarBelowUnitScale(Check):
    __doc__ = __doc__
    code = "KBW057"
    name = "targets-far-below-unit-scale"
    entry = "targets-scaled-too-small"
    title = "regression targets with a std of 1e-3 or less, and an MSE that never gets under their variance"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}  # (where, site) -> [calls, hits, first step, first ratio, last ratio, largest std]

    def on_loss(self, call):
        stats = mse_target_stats(call)
        if stats is None:
            return
        loss, _, var = stats
        std = math.sqrt(var)
        st = self.sites.setdefault((loss_where(call), call.site), [0, 0, self.session.step, None, None, 0.0])
        st[0] += 1
        if not 0 < std <= MAX_STD:
            return
        ratio = loss / var
        if st[3] is None and st[1] == 0:
            st[3] = ratio
        if ratio > 1:
            st[1] += 1
            st[4] = ratio
            st[5] = max(st[5], std)

    def findings(self) -> list:
        out = []
        for (where, site), (calls, hits, step, first, last, std) in self.sites.items():
            if hits < MIN_CALLS or hits < calls or first is None or first < FIRST_RATIO:
                continue
            message = (f"mse_loss got targets with a standard deviation of at most {std:.2g} on {hits} of {hits} sampled "
                       f"calls from step {step} ({where}); the loss was {first:.3g}x their variance at first and is still "
                       f"{last:.3g}x (R^2 below 0 throughout, worse than predicting their mean): the model's output "
                       f"noise dwarfs the targets, so a small absolute loss hides that nothing was learned; "
                       f"standardise the targets (and un-scale "
                       f"the predictions) or scale them to about unit size")
            out.append(self.finding(message, where=site, step=step, evidence={
                "calls": hits, "target_std": std, "first_loss_to_variance": first, "last_loss_to_variance": last}))
        return out
