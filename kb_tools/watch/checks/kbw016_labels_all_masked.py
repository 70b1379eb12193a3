"""KBW016: every label of a batch equals ignore_index, so the classification loss has no target.

Criterion: at one loss site, on at least 2 sampled calls of cross_entropy or nll_loss with
integer (class-index) targets, every element of the non-empty target equals the loss's
ignore_index (default -100); or on one such call whose mean came out NaN (an all-masked batch is
then proven to reach the loss and to be what made it NaN, and later ones fall between samples).
The mean reduction returns NaN and the sum reduction 0, and in both cases every gradient the loss
sends back is exactly zero: those batches train nothing.
"""
from __future__ import annotations

import math

import torch

from kb_tools.watch.checks import Check, loss_where, plural

MIN_CALLS = 2


class LabelsAllMasked(Check):
    __doc__ = __doc__
    code = "KBW016"
    name = "labels-all-masked"
    entry = "labels-all-masked"
    title = "classification loss whose targets are all ignore_index: NaN or 0 loss, zero gradient"
    confidence = 0.95

    def __init__(self, session):
        super().__init__(session)
        # (kind, where, site) -> [calls, masked calls, first step, targets, ignore, last loss, a masked call made NaN]
        self.sites: dict = {}

    def on_loss(self, call):
        if call.kind not in ("cross_entropy", "nll_loss"):
            return
        y = call.target
        if not isinstance(y, torch.Tensor) or y.is_floating_point() or y.is_complex() or y.numel() == 0:
            return
        ignore = call.options.get("ignore_index", -100)
        key = (call.kind, loss_where(call), call.site)
        st = self.sites.get(key)
        if st is None:
            st = self.sites[key] = [0, 0, None, 0, ignore, None, False]
        st[0] += 1
        if bool((y != ignore).any()):
            return
        st[1] += 1
        st[3] = max(st[3], y.numel())
        if st[2] is None:
            st[2] = self.session.step
        out = call.output
        if isinstance(out, torch.Tensor) and out.numel() == 1:
            st[5] = float(out.detach())
            st[6] = st[6] or math.isnan(st[5])

    def findings(self) -> list:
        out = []
        for (kind, where, site), (calls, masked, step, targets, ignore, last, made_nan) in self.sites.items():
            if masked < MIN_CALLS and not (masked and made_nan):
                continue
            value = "" if last is None else f"; the loss was {'nan' if math.isnan(last) else f'{last:.3g}'}"
            message = (f"{kind} got targets that were all ignore_index={ignore} on {masked} of "
                       f"{plural(calls, 'sampled call')} from step {step} ({where}), up to {targets} targets "
                       f"per call{value}: those batches have no label to learn from and send back a zero gradient; "
                       f"check the masking and the truncation that built the labels")
            out.append(self.finding(message, where=site, step=step, evidence={
                "calls": calls, "masked_calls": masked, "ignore_index": ignore, "targets": targets, "last_loss": last}))
        return out
