"""KBW008: nll_loss or ctc_loss receives raw scores or probabilities instead of log-probabilities.

Criterion: at one loss site, on at least 2 sampled calls and on every sampled call, at least half
of the input rows (C >= 2 classes, ignore_index rows left out; for ctc_loss the (T, N, C) input's
last dimension) have a logsumexp farther than 0.01 from 0, i.e. exp(input) does not sum to 1 over
the classes. nll_loss only picks -input[target]: on probabilities the loss is trapped in [-1, 0],
on raw scores it is unbounded below; ctc_loss sums such picks along every alignment, with the same
effect (on raw scores its loss can go negative).
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, loss_where
from kb_tools.watch.checks.tensors import are_probabilities, class_rows, log_probability_share

MIN_CALLS = 2


class NllWithoutLogSoftmax(Check):
    __doc__ = __doc__
    code = "KBW008"
    name = "nll-without-log-softmax"
    entry = "nll-needs-log-softmax"
    title = "nll_loss or ctc_loss inputs whose exp does not sum to 1 over the classes: not log-probabilities"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}  # site -> [calls, hits, probability hits, classes, first step, lowest loss]

    def on_loss(self, call):
        if call.kind not in ("nll_loss", "ctc_loss"):
            return
        found = class_rows(call, classes_last=call.kind == "ctc_loss")
        if found is None:
            return
        rows, classes = found
        st = self.sites.setdefault((call.kind, loss_where(call), call.site), [0, 0, 0, classes, None, None])
        st[0] += 1
        if log_probability_share(rows) <= 0.5:
            st[1] += 1
            st[2] += are_probabilities(rows)
            if st[4] is None:
                st[4] = self.session.step
            if call.output is not None and call.output.numel() == 1:
                value = float(call.output.detach())
                st[5] = value if st[5] is None else min(st[5], value)

    def findings(self) -> list:
        out = []
        for (kind, where, site), (calls, hits, probs, classes, step, lowest) in self.sites.items():
            if hits < MIN_CALLS or hits < calls:
                continue
            if probs == hits:
                what, effect = "probabilities", "the loss is trapped between -1 and 0 and barely punishes mistakes"
            else:
                what, effect = "raw scores", "the loss is unbounded below and falls by inflating the target score"
            if kind == "ctc_loss":
                effect = "it scores alignments with values that are not log-likelihoods"
                remedy = "apply log_softmax over the classes first"
            else:
                effect = f"nll_loss only picks -input[target], so {effect}"
                remedy = "apply log_softmax first (or use cross_entropy on logits)"
            message = (f"{kind} got {what}, not log-probabilities: on {hits} of {hits} sampled calls exp(input) "
                       f"did not sum to 1 over its {classes} classes ({where}); {effect}: {remedy}")
            out.append(self.finding(message, where=site, step=step, evidence={
                "calls": hits, "classes": classes, "input": what, "lowest_loss": lowest}))
        return out
