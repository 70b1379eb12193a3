"""KBW028: the GradScaler's loss scale keeps halving: every step is skipped on an inf/NaN gradient.

Criterion: on a sampled backward() or step(), an enabled GradScaler's scale is at most 2**-20 of
the largest scale it had (65536 falls below 0.0625), and it never grew in between. A GradScaler
halves its scale only on a step it skipped because a gradient was inf or NaN, so this is at least
20 skipped steps in a row of growth; a scale that calibrates itself falls a few times and levels
off, and one that settles low on huge gradients lets steps land long before 2**-20.
"""
from __future__ import annotations

import math
import weakref

from kb_tools.watch.checks import Check, created_at

FALL = 2.0 ** 20
MAX_SCALERS = 8


class _State:
    __slots__ = ("ref", "site", "peak", "last", "found", "init")

    def __init__(self, scaler, site):
        self.ref, self.site = weakref.ref(scaler), site
        self.init = float(getattr(scaler, "_init_scale", 0.0) or 0.0)
        self.peak = self.last = None
        self.found = None  # (step, scale, peak, backward calls, optimizer steps)


class GradScalerScaleCollapse(Check):
    __doc__ = __doc__
    code = "KBW028"
    name = "gradscaler-scale-collapse"
    entry = "gradscaler-scale-collapse"
    title = "GradScaler scale fallen by 2**20 without growing: every step skipped on inf/NaN gradients"
    confidence = 0.92

    def __init__(self, session):
        super().__init__(session)
        self.states: list[_State] = []

    def _measure(self):
        s = self.session
        for info in s.scalers[:MAX_SCALERS]:
            scaler = info.scaler
            if scaler is None:
                continue
            st = next((x for x in self.states if x.ref() is scaler), None)
            if st is None:
                if len(self.states) >= MAX_SCALERS:
                    continue
                st = _State(scaler, info.site)
                self.states.append(st)
            if st.found is not None or not scaler.is_enabled() or getattr(scaler, "_scale", None) is None:
                continue
            scale = float(scaler.get_scale())
            if not math.isfinite(scale):
                continue
            if st.peak is None or (st.last is not None and scale > st.last):
                st.peak = scale  # the first reading, or the scale grew: start again from here
            st.last = scale
            if scale <= st.peak / FALL:
                primary = s.primary_info()
                st.found = (s.step, scale, st.peak, s.backward_calls, primary.steps if primary else 0)

    def on_before_backward(self, tensors):
        self._measure()

    def on_step_pre(self, optimizer):
        self._measure()

    def findings(self) -> list:
        out = []
        for st in self.states:
            if st.found is None:
                continue
            step, scale, peak, backwards, steps = st.found
            halvings = round(math.log2(peak / scale)) if scale > 0 else None
            message = (f"the GradScaler's scale ({created_at('scaler', st.site)}) fell from {peak:g} to {scale:.3g} "
                       f"({halvings} halvings) without growing once, by optimizer step {step}, after "
                       f"{backwards} backward() calls: it halves only when scaler.step() skips the step on an inf or "
                       f"NaN gradient, so every step is being skipped and the weights do not move; the non-finite "
                       f"gradient does not depend on the scale (an fp16 overflow in the forward pass, or a NaN op)")
            out.append(self.finding(message, where=st.site, step=step, evidence={
                "scale": scale, "peak_scale": peak, "init_scale": st.init, "halvings": halvings,
                "backward_calls": backwards, "optimizer_steps": steps}))
        return out
