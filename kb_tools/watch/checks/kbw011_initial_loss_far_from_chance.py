"""KBW011: the loss before any optimizer step is far above the chance value ln(C).

Criterion: the first sampled call of a cross_entropy loss (or nll_loss on log-probabilities) with
reduction "mean", made before any optimizer step, returns more than 3 x ln(C) and more than
ln(C) + 2 for C classes. An untrained classifier with a sensible initialization is close to
uniform, so its loss is about ln(C); one far above it is confidently wrong from the start
(weights drawn too large, inputs not normalized), and spends its first steps undoing that.
"""
from __future__ import annotations

import math

from kb_tools.watch.checks import Check, loss_where
from kb_tools.watch.checks.tensors import class_rows, log_probability_share, probability_target_rows

FACTOR = 3.0
MARGIN = 2.0


class InitialLossFarFromChance(Check):
    __doc__ = __doc__
    code = "KBW011"
    name = "initial-loss-far-from-chance"
    entry = "init-loss-check"
    title = "loss before the first step far above ln(C): initialization or input scale"
    confidence = 0.75

    def __init__(self, session):
        super().__init__(session)
        self.found = None  # (site, kind, value, classes)

    def on_loss(self, call):
        s = self.session
        if self.found is not None or not call.first or s.step or any(i.steps for i in s.optimizers.values()):
            return
        if call.kind not in ("cross_entropy", "nll_loss") or call.reduction != "mean":
            return
        out = call.output
        if out is None or out.numel() != 1:
            return
        rows = class_rows(call)
        if rows is None:
            return
        rows, classes = rows
        targets = probability_target_rows(call)
        if targets is not None and not bool(((targets.sum(-1) - 1).abs() <= 1e-2).all()):
            return  # probability targets that do not sum to 1 (multi-hot: KBW048's case): ln(C) is no baseline
        if call.kind == "nll_loss" and log_probability_share(rows) < 0.9:
            return  # not log-probabilities: KBW008's case, and the value means nothing here
        value = float(out.detach())
        chance = math.log(classes)
        if math.isfinite(value) and value > FACTOR * chance and value > chance + MARGIN:
            self.found = (call.site, call.kind, value, classes, loss_where(call))

    def findings(self) -> list:
        if self.found is None:
            return []
        site, kind, value, classes, where = self.found
        chance = math.log(classes)
        message = (f"the first {kind} loss, before any optimizer step, was {value:.3g}: {value / chance:.1f}x the "
                   f"chance value ln({classes}) = {chance:.2f} of an untrained classifier ({where}); "
                   f"the untrained model is confidently wrong: check the weight initialization scale and the "
                   f"input normalization")
        return [self.finding(message, where=site, step=0, evidence={
            "initial_loss": value, "classes": classes, "chance_loss": chance, "ratio": value / chance})]
