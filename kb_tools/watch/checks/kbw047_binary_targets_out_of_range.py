"""KBW047: binary cross-entropy targets outside [0, 1]: class indices 0..C-1 fed to a binary loss.

Criterion: one sampled call of binary_cross_entropy or binary_cross_entropy_with_logits whose
target holds a value above 1 or below 0 (by more than 1e-6). For a target t > 1 the loss
t*softplus(-z) - (t-1)*softplus(z) falls without bound as the logit z grows, so the loss goes
negative and keeps falling; BCELoss raises instead. Integer labels of a multi-class problem
(one output unit, labels 0..9) are the usual source.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, loss_where

SLACK = 1e-6


class BinaryTargetsOutOfRange(Check):
    __doc__ = __doc__
    code = "KBW047"
    name = "binary-targets-out-of-range"
    entry = "multiclass-with-binary-loss"
    title = "binary cross-entropy targets outside [0, 1]: class indices fed to a binary loss"
    confidence = 0.95

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}  # (where, site, kind) -> [calls, first step, lowest, highest, integer, values]

    def on_loss_input(self, call):
        if call.kind not in ("binary_cross_entropy", "binary_cross_entropy_with_logits"):
            return
        y = call.target
        if not isinstance(y, torch.Tensor) or y.numel() == 0 or y.is_complex():
            return
        y = y.detach().float()
        low, high = float(y.min()), float(y.max())
        if low >= -SLACK and high <= 1 + SLACK:
            return
        integer = bool((y == y.round()).all())
        values = int(torch.unique(y.reshape(-1)[:65536]).numel()) if integer else None
        st = self.sites.setdefault((loss_where(call), call.site, call.kind),
                                   [0, self.session.step, low, high, integer, values])
        st[0] += 1
        st[2], st[3] = min(st[2], low), max(st[3], high)
        st[4] = st[4] and integer

    def findings(self) -> list:
        out = []
        for (where, site, kind), (calls, step, low, high, integer, values) in self.sites.items():
            what = (f"integer labels from {low:.0f} to {high:.0f} ({values} distinct values)" if integer
                    else f"values from {low:.3g} to {high:.3g}")
            message = (f"{kind} got targets outside [0, 1], {what}, at step {step} ({where}): a binary loss scores one "
                       f"probability against 0 or 1, and for a target above 1 it falls without bound as the logit "
                       f"grows; for one label out of C classes give the model C outputs and use cross_entropy on "
                       f"the integer labels")
            out.append(self.finding(message, where=site, step=step, evidence={
                "calls": calls, "min_target": low, "max_target": high, "integer_targets": integer,
                "distinct_values": values}))
        return out
