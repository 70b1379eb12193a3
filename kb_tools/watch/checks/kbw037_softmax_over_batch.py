"""KBW037: the scores reaching cross_entropy / nll_loss were normalised over the batch axis.

Criterion: at one loss site, on at least 2 sampled calls and on every sampled call, the input
(N >= 2 samples, C >= 2 classes) is normalised along dim 0 instead of the class dim: for nll_loss
the logsumexp over the samples is within 0.01 of 0 for at least 90% of the (class, position)
columns, for cross_entropy the values lie in [0, 1] and sum to 1 over the samples likewise; and
the rows over the classes are not normalised (fewer than half of them). A softmax or log_softmax
with dim=0 (or with no dim on a 3-D tensor) does this: each class is spread over the batch.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, loss_where
from kb_tools.watch.checks.tensors import class_rows, log_probability_share

MIN_CALLS = 2
COLUMN_SHARE = 0.9
TOL = 1e-2


def _over_batch(kind: str, x) -> bool:
    x = x.detach().float()
    if kind == "nll_loss":
        return float(((x.logsumexp(0)).abs() <= TOL).float().mean()) >= COLUMN_SHARE
    if float(x.min()) < 0 or float(x.max()) > 1:
        return False
    return float(((x.sum(0) - 1).abs() <= TOL).float().mean()) >= COLUMN_SHARE


class SoftmaxOverBatch(Check):
    __doc__ = __doc__
    code = "KBW037"
    name = "softmax-over-batch"
    entry = "softmax-wrong-dim"
    title = "cross_entropy / nll_loss inputs normalised over the batch axis: softmax taken with dim=0"
    confidence = 0.93

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}  # (where, site) -> [calls, hits, samples, classes, first step]

    def on_loss(self, call):
        if call.kind not in ("nll_loss", "cross_entropy"):
            return
        x = call.input
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() < 2 \
                or x.shape[0] < 2 or x.shape[1] < 2:
            return
        found = class_rows(call)
        if found is None:
            return
        rows, classes = found
        st = self.sites.setdefault((loss_where(call), call.site, call.kind), [0, 0, x.shape[0], classes, None])
        st[0] += 1
        rows_normalised = log_probability_share(rows) > 0.5 if call.kind == "nll_loss" else \
            float(((rows.sum(-1) - 1).abs() <= TOL).float().mean()) > 0.5
        if not rows_normalised and _over_batch(call.kind, x):
            st[1] += 1
            st[4] = self.session.step if st[4] is None else st[4]

    def findings(self) -> list:
        out = []
        for (where, site, kind), (calls, hits, samples, classes, step) in self.sites.items():
            if hits < MIN_CALLS or hits < calls:
                continue
            what = "log-probabilities" if kind == "nll_loss" else "probabilities"
            message = (f"the {what} reaching the loss were normalised over the batch ({samples} samples), not over "
                       f"the {classes} classes, on {hits} of {hits} sampled calls ({where}): a softmax with dim=0 (or "
                       f"no dim on a 3-D tensor) spreads each class over the batch, so every prediction depends on "
                       f"the other samples; use dim=1 (or -1 for (N, C))")
            out.append(self.finding(message, where=site, step=step,
                                    evidence={"calls": hits, "samples": samples, "classes": classes}))
        return out
