"""KBW044: clip_grad_norm_ clips every step of an SGD optimizer far below the gradient's own norm, a
learning-rate cut nobody configured.

Criterion: at one clip site, on at least MIN_CALLS sampled calls of clip_grad_norm_ whose first
parameter belongs to a torch.optim.SGD optimizer (whose step is proportional to the gradient) and
with no enabled GradScaler (scaled gradients are KBW029's), the norm it returned exceeded max_norm
on every call, and the share of the step it kept, the mean of max_norm / norm, is at most
KEPT_SHARE. Clipping that acts on spikes keeps most steps whole; Adam-type optimizers divide the
scale out of their step, so a low threshold there costs little and is not judged.
"""
from __future__ import annotations

import math

import torch

from kb_tools.watch.checks import Check, plural

MIN_CALLS = 8
KEPT_SHARE = 0.2
MAX_SITES = 16


class ClipThresholdTooSmall(Check):
    __doc__ = __doc__
    code = "KBW044"
    name = "clip-threshold-too-small"
    entry = "clip-threshold-too-small"
    title = "clip_grad_norm_ clips every SGD step to a small share of its norm (max_norm far below the norm)"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        # site -> [calls, clipped calls, sum of kept shares, first step, max_norm, lowest norm, highest norm, optimizer]
        self.sites: dict = {}

    def on_clip(self, call):
        if not call.parameters or call.norm is None or not call.max_norm or call.max_norm <= 0:
            return
        s = self.session
        if any(scaler.is_enabled() for scaler in s.live_scalers()):
            return
        first = call.parameters[0]
        opt = next((o for o in s.live_optimizers() if any(p is first for p in s.params_of(o))), None)
        if not isinstance(opt, torch.optim.SGD):
            return
        try:
            norm = float(call.norm)
        except (TypeError, ValueError, RuntimeError):
            return
        if not math.isfinite(norm):
            return
        st = self.sites.get(call.site)
        if st is None:
            if len(self.sites) >= MAX_SITES:
                return
            info = s.optimizer_info(opt)
            st = self.sites[call.site] = [0, 0, 0.0, s.step, float(call.max_norm), norm, norm,
                                          f"SGD{f' created at {info.site}' if info and info.site else ''}"]
        st[0] += 1
        st[1] += norm > call.max_norm
        st[2] += min(1.0, call.max_norm / norm) if norm > 0 else 1.0
        st[5], st[6] = min(st[5], norm), max(st[6], norm)

    def findings(self) -> list:
        out = []
        for site, (calls, clipped, kept, step, max_norm, low, high, opt) in self.sites.items():
            if calls < MIN_CALLS or clipped < calls or kept / calls > KEPT_SHARE:
                continue
            message = (f"clip_grad_norm_ (called at {site}) clipped the gradient on every one of its "
                       f"{plural(calls, 'sampled call')} from step {step}: it returned norms of {low:.3g}-{high:.3g} "
                       f"against max_norm={max_norm:g}, so {opt} kept {kept / calls:.1%} of each step on average, "
                       f"as if its learning rate were cut that much; log the norms with clipping off and set "
                       f"max_norm a few times above their median")
            out.append(self.finding(message, where=site, step=step, evidence={
                "calls": calls, "clipped_calls": clipped, "kept_share": kept / calls, "max_norm": max_norm,
                "lowest_norm": low, "highest_norm": high}))
        return out
