"""KBW049: a std or var over one element per output value returned NaN (Bessel's correction, 0/0).

Criterion: on any step (not only sampled ones: the one-sample batch is often an epoch's last), a
call of torch.std, var, std_mean or var_mean (or the Tensor methods) whose input has no more
elements than its output, i.e. one element per reduced value, returns NaN, and its input is part
of the autograd graph (requires grad) or grad mode is on (a forward being trained). With the
default correction=1 the sum of squared deviations is divided by N - 1 = 0; an epsilon added
afterwards cannot help. Reported once per call site, with the step and the shapes.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, plural

MAX_SITES = 16


class StdOfOneElement(Check):
    __doc__ = __doc__
    code = "KBW049"
    name = "std-of-one-element"
    entry = "std-of-one-sample"
    title = "std/var over a dimension of size 1 giving NaN (a one-sample batch standardised with correction=1)"
    confidence = 0.93  # above KBW006's nan-loss (0.9): it names the cause of that NaN

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}  # (name, site) -> [calls, first step, input shape, output shape]

    def on_spread(self, call):
        if not (call.requires_grad or call.grad_enabled):
            return
        key = (call.name, call.site)
        st = self.sites.get(key)
        if st is None:
            if len(self.sites) >= MAX_SITES:
                return
            st = self.sites[key] = [0, self.session.step, call.input_shape, call.output_shape]
        st[0] += 1

    def findings(self) -> list:
        out = []
        for (name, site), (calls, step, shape_in, shape_out) in self.sites.items():
            where = f"called at {site}" if site else "the call site is unknown"
            message = (f"{name}() returned NaN at step {step} ({where}; {plural(calls, 'call')}): its input "
                       f"{list(shape_in)} holds one element per output value {list(shape_out)}, and the default "
                       f"correction=1 divides by N - 1 = 0; use correction=0 (population variance, as the norm "
                       f"layers do) with the epsilon under the square root, skip it when the dimension has one "
                       f"element, or drop_last=True for a short final batch")
            out.append(self.finding(message, where=site, step=step, evidence={
                "calls": calls, "function": name, "input_shape": list(shape_in), "output_shape": list(shape_out)}))
        return out
