"""KBW007: cross_entropy receives probabilities (a softmax already applied), not logits.

Criterion: at one loss site, on at least 2 sampled calls and on every sampled call, every row of
the input (C >= 2 classes, rows whose target is ignore_index left out) lies in [0, 1] and sums to
1 within 1e-3. Raw logits essentially never do; cross_entropy applies its own log_softmax, so the
loss then has a floor at log(e + C - 1) - 1 and a shrunken gradient.
"""
from __future__ import annotations

import math

from kb_tools.watch.checks import Check, loss_where
from kb_tools.watch.checks.tensors import are_probabilities, class_rows

MIN_CALLS = 2


class ProbabilitiesIntoCrossEntropy(Check):
    __doc__ = __doc__
    code = "KBW007"
    name = "probabilities-into-cross-entropy"
    entry = "double-softmax"
    title = "cross_entropy inputs that are rows in [0, 1] summing to 1: softmax applied twice"
    confidence = 0.95

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}  # site -> [calls, probability calls, classes, first step, rows, last loss]

    def on_loss(self, call):
        if call.kind != "cross_entropy":
            return
        found = class_rows(call)
        if found is None:
            return
        rows, classes = found
        st = self.sites.setdefault((loss_where(call), call.site), [0, 0, classes, None, 0, None])
        st[0] += 1
        if are_probabilities(rows):
            st[1] += 1
            st[4] = max(st[4], rows.shape[0])
            if st[3] is None:
                st[3] = self.session.step
            if call.output is not None and call.output.numel() == 1:
                st[5] = float(call.output.detach())

    def findings(self) -> list:
        out = []
        for (where, site), (calls, hits, classes, step, rows, last) in self.sites.items():
            if hits < MIN_CALLS or hits < calls:
                continue
            floor = math.log(math.e + classes - 1) - 1
            message = (f"cross_entropy got probabilities, not logits: on {hits} of {hits} sampled calls every row "
                       f"of its input ({classes} classes) was in [0, 1] and summed to 1 "
                       f"({where}); it applies log_softmax itself, so with {classes} classes "
                       f"the loss cannot go below log(e+{classes - 1})-1 = {floor:.2f}: pass the raw logits")
            out.append(self.finding(message, where=site, step=step, evidence={
                "calls": hits, "classes": classes, "rows_checked": rows, "loss_floor": floor, "last_loss": last}))
        return out
