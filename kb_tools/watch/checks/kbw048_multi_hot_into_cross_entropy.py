"""KBW048: multi-hot targets into cross_entropy: several positive classes per sample under one softmax.

Criterion: at one loss site, on at least 2 sampled calls, cross_entropy gets floating targets of
the input's shape (the class-probability form) with every value in [0, 1] and at least one row
whose values sum to 1.5 or more (two or more positive classes); a probability target sums to 1.
The softmax shares one unit of probability among the classes, so a row with k positives can
reach at most 1/k on each and no tag passes a 0.5 threshold. Label smoothing and mixup rows sum
to 1 and are not reported.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, loss_where
from kb_tools.watch.checks.tensors import probability_target_rows

MIN_CALLS = 2
ROW_SUM = 1.5


class MultiHotIntoCrossEntropy(Check):
    __doc__ = __doc__
    code = "KBW048"
    name = "multi-hot-into-cross-entropy"
    entry = "multilabel-with-cross-entropy"
    title = "cross_entropy targets with several positive classes in a row (multi-label data under one softmax)"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}  # (where, site) -> [calls, hits, first step, share of rows, most positives]

    def on_loss_input(self, call):
        if call.kind != "cross_entropy":
            return
        rows = probability_target_rows(call)
        if rows is None:
            return
        st = self.sites.setdefault((loss_where(call), call.site), [0, 0, None, 0.0, 0.0])
        st[0] += 1
        if float(rows.min()) < 0 or float(rows.max()) > 1:
            return
        sums = rows.sum(-1)
        many = sums >= ROW_SUM
        if not bool(many.any()):
            return
        st[1] += 1
        st[2] = self.session.step if st[2] is None else st[2]
        st[3] = max(st[3], float(many.float().mean()))
        st[4] = max(st[4], float(sums.max()))

    def findings(self) -> list:
        out = []
        for (where, site), (calls, hits, step, share, most) in self.sites.items():
            if hits < MIN_CALLS:
                continue
            message = (f"cross_entropy got multi-hot targets on {hits} of {calls} sampled calls from step {step} "
                       f"({where}): up to {share:.0%} of the rows sum to 1.5 or more (at most {most:.3g}), but a "
                       f"softmax over the classes shares one unit of probability, so a sample with k tags gets at "
                       f"most 1/k on each; for multi-label data use BCEWithLogitsLoss on the (N, C) logits")
            out.append(self.finding(message, where=site, step=step, evidence={
                "calls": calls, "multi_hot_calls": hits, "rows_with_several_positives": share, "largest_row_sum": most}))
        return out
