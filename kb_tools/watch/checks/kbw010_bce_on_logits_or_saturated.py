"""KBW010: binary_cross_entropy (BCELoss) fed logits, or sigmoid outputs saturated to exactly 0 or 1.

Criterion: either one call whose input leaves [0, 1] (raw logits: torch raises "all elements of
input should be between 0 and 1"; the finding is recorded before it does), or, at one loss site,
at least 2 sampled calls on which at least 1% of the input values are exactly 0.0 or 1.0: a
sigmoid rounded to the rail, where BCELoss caps the loss at 100 and the gradient is zero, so
those samples never learn. BCEWithLogitsLoss on the logits has neither problem.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, loss_where

MIN_SATURATED_CALLS = 2
MIN_SATURATED_SHARE = 0.01


class BceOnLogitsOrSaturated(Check):
    __doc__ = __doc__
    code = "KBW010"
    name = "bce-on-logits-or-saturated"
    entry = "bce-with-logits"
    title = "BCELoss inputs outside [0, 1] (logits) or stuck at exactly 0 or 1 (saturated sigmoid)"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.outside: dict = {}    # site -> [calls, first step, min, max]
        self.saturated: dict = {}  # site -> [calls, first step, largest share]

    def on_loss_input(self, call):
        if call.kind != "binary_cross_entropy":
            return
        x = call.input
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
            return
        x = x.detach()
        low, high = float(x.min()), float(x.max())
        if low < 0 or high > 1:
            st = self.outside.setdefault((loss_where(call), call.site), [0, self.session.step, low, high])
            st[0] += 1
            st[2], st[3] = min(st[2], low), max(st[3], high)
            return
        share = float(((x == 0) | (x == 1)).float().mean())
        if share >= MIN_SATURATED_SHARE:
            st = self.saturated.setdefault((loss_where(call), call.site), [0, self.session.step, 0.0])
            st[0] += 1
            st[2] = max(st[2], share)

    def findings(self) -> list:
        out = []
        for (where, site), (calls, step, low, high) in self.outside.items():
            message = (f"binary_cross_entropy got values outside [0, 1] (from {low:.3g} to {high:.3g}) at step {step} "
                       f"({where}): these are logits, which BCELoss cannot take; use "
                       f"BCEWithLogitsLoss on the logits")
            out.append(self.finding(message, where=site, step=step, confidence=0.95,
                                    evidence={"calls": calls, "min": low, "max": high}))
        for (where, site), (calls, step, share) in self.saturated.items():
            if calls < MIN_SATURATED_CALLS:
                continue
            message = (f"binary_cross_entropy got sigmoid outputs that are exactly 0 or 1 (up to {share:.0%} of them) "
                       f"on {calls} sampled calls from step {step} ({where}): BCELoss caps those "
                       f"losses at 100 with a zero gradient, so they never learn; use BCEWithLogitsLoss on the logits")
            out.append(self.finding(message, where=site, step=step, confidence=0.85,
                                    evidence={"calls": calls, "saturated_share": share}))
        return out
