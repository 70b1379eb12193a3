"""KBW022: the classification loss stays at the chance value ln(C), the same prediction for every sample.

Criterion: at one cross_entropy site (or nll_loss on log-probabilities), with C >= 3 classes
and reduction "mean", every sampled call made with grad enabled from step 10 on (at least 4
calls, the last at step 40 or later) returned a loss within 5% of ln(C), the loss of a
uniform prediction, and received class scores that are the same for every sample of the
batch (at least 4 rows, each within 1e-3 x max(1, mean |score|) of the batch's mean row),
while the primary optimizer's learning rate did not rise over those steps (a warmup still in
progress is not judged). A model whose output does not depend on its input can only learn the
label prior: the features never reach it (a wrong batch key, inputs zeroed, overwritten or
scaled down to nothing). A slowly learning model is not reported: its scores differ between
samples from the first step.
"""
from __future__ import annotations

import math

import torch

from kb_tools.watch.checks import Check, loss_where
from kb_tools.watch.checks.tensors import class_rows, log_probability_share

FROM_STEP = 10
MIN_CALLS = 4
LAST_STEP = 40
BAND = 0.05
MIN_CLASSES = 3
MIN_ROWS = 4
SPREAD = 1e-3


class _Site:
    __slots__ = ("classes", "calls", "inside", "low", "high", "spread", "first", "last", "lr_first", "lr_last")

    def __init__(self, classes):
        self.classes = classes
        self.calls = self.inside = 0
        self.low, self.high = math.inf, -math.inf   # loss / ln(C) over the judged calls
        self.spread = 0.0                           # largest relative spread of the rows seen
        self.first = self.last = None
        self.lr_first = self.lr_last = None


class LossFlatAtChance(Check):
    __doc__ = __doc__
    code = "KBW022"
    name = "loss-flat-at-chance"
    entry = "input-independent-baseline"
    title = "classification loss at ln(C) with the same scores for every sample, from step 10 to 40 or later"
    confidence = 0.6

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}

    def on_loss(self, call):
        s = self.session
        if call.kind not in ("cross_entropy", "nll_loss") or not call.grad_enabled or call.reduction != "mean" \
                or s.step < FROM_STEP:
            return
        out = call.output
        if out is None or out.numel() != 1:
            return
        key = (call.kind, loss_where(call), call.site)
        st = self.sites.get(key)
        if st is not None and st.inside < st.calls:
            return  # one call off chance already rules this loss out: nothing more to measure
        found = class_rows(call)
        if found is None:
            return
        rows, classes = found
        if classes < MIN_CLASSES or rows.shape[0] < MIN_ROWS:
            return
        if call.kind == "nll_loss" and log_probability_share(rows) < 0.9:
            return
        if st is None:
            if len(self.sites) >= 32:
                return
            st = self.sites[key] = _Site(classes)
        ratio = float(out.detach()) / math.log(classes)
        if not math.isfinite(ratio):
            ratio = math.inf
        mean_row = rows.mean(0)
        # the largest |row - mean| from the per-class extremes: no batch-sized difference is allocated
        deviation = torch.maximum(rows.amax(0) - mean_row, mean_row - rows.amin(0)).max()
        scale = mean_row.abs().mean()
        spread = float(deviation) / max(1.0, float(scale))
        if not math.isfinite(spread):
            spread = math.inf
        st.calls += 1
        st.inside += abs(ratio - 1) <= BAND and spread <= SPREAD
        st.spread = max(st.spread, spread)
        st.low, st.high = min(st.low, ratio), max(st.high, ratio)
        lr = s.primary_lr()
        if st.first is None:
            st.first, st.lr_first = s.step, lr
        st.last, st.lr_last = s.step, lr

    def findings(self) -> list:
        out = []
        for (kind, where, site), st in self.sites.items():
            if st.calls < MIN_CALLS or st.inside < st.calls or st.last is None or st.last < LAST_STEP:
                continue
            if st.lr_first is not None and st.lr_last is not None and st.lr_last > st.lr_first * 1.01:
                continue
            chance = math.log(st.classes)
            message = (f"the {kind} loss stayed at chance: on all {st.calls} sampled training calls from step "
                       f"{st.first} to step {st.last} it was between {st.low * chance:.3f} and {st.high * chance:.3f}, "
                       f"within {BAND:.0%} of ln({st.classes}) = {chance:.3f}, and the class scores were the same "
                       f"for every sample of the batch (largest relative spread {st.spread:.1e}) ({where}): the "
                       f"model's output does not depend on its input; check that the features reach the model "
                       f"(the batch key, masks, scaling)")
            out.append(self.finding(message, where=site, step=st.first, evidence={
                "calls": st.calls, "classes": st.classes, "chance_loss": chance, "lowest_loss": st.low * chance,
                "highest_loss": st.high * chance, "largest_spread": st.spread, "first_step": st.first,
                "last_step": st.last}))
        return out
