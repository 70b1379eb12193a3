"""KBW058: regression targets far above unit scale, never standardised: the untrained output is nowhere near.

Criterion: at one mse_loss site, on every sampled call (at least 5), the targets' root mean square
is at least 100, the first call's loss is at least half the targets' mean square (the model starts
at about 0 while the targets sit far away), and the loss stays above the targets' variance on
every call (R^2 below 0: worse than predicting their mean). A network initialised for outputs of
order 1 needs a very long way to reach targets in the hundreds of thousands; a head whose bias or
output scaling already matches the targets starts near their variance and is not reported.
"""
from __future__ import annotations

import math

from kb_tools.watch.checks import Check, loss_where
from kb_tools.watch.checks.tensors import mse_target_stats

MIN_CALLS = 5
MIN_RMS = 100.0
FIRST_SHARE = 0.5


class TargetsFarAboveUnitScale(Check):
    __doc__ = __doc__
    code = "KBW058"
    name = "targets-far-above-unit-scale"
    entry = "targets-not-standardized"
    title = "regression targets in the hundreds or more, unstandardised: the MSE starts near their mean square"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}  # (where, site) -> [calls, hits, first step, first share, last ratio, rms, std]

    def on_loss(self, call):
        stats = mse_target_stats(call)
        if stats is None:
            return
        loss, square, var = stats
        st = self.sites.setdefault((loss_where(call), call.site), [0, 0, self.session.step, None, None, 0.0, 0.0])
        st[0] += 1
        if math.sqrt(square) < MIN_RMS or var <= 0 or not math.isfinite(loss):
            return
        if st[3] is None and st[1] == 0:
            st[3] = loss / square
        if loss > var:
            st[1] += 1
            st[4] = loss / var
            st[5], st[6] = max(st[5], math.sqrt(square)), max(st[6], math.sqrt(var))

    def findings(self) -> list:
        out = []
        for (where, site), (calls, hits, step, first, last, rms, std) in self.sites.items():
            if hits < MIN_CALLS or hits < calls or first is None or first < FIRST_SHARE:
                continue
            message = (f"mse_loss got targets with a root mean square of {rms:.3g} (spread {std:.3g}) on {hits} of {hits} "
                       f"sampled calls from step {step} ({where}); the first loss was {first:.0%} of their mean square "
                       f"and the loss is still {last:.3g}x their variance (R^2 below 0 throughout): a network that "
                       f"starts near 0 has to travel orders of magnitude before it learns anything; standardise the "
                       f"targets with the training mean and std (and map the predictions back)")
            out.append(self.finding(message, where=site, step=step, evidence={
                "calls": hits, "target_rms": rms, "target_std": std, "first_loss_to_mean_square": first,
                "last_loss_to_variance": last}))
        return out
