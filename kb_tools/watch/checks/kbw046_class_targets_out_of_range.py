"""KBW046: class-index targets outside 0..C-1 at cross_entropy / nll_loss: the head has too few outputs.

Criterion: one sampled call of cross_entropy or nll_loss with integer (class-index) targets in which
a target other than ignore_index is below 0 or at least C, the size of the input's class dimension
(dim 1, or 0 for an unbatched input). torch raises "Target N is out of bounds" on the CPU and a
device-side assert on CUDA; the finding is recorded before the call, so the report names the
cause beside the run's error. A head sized for another task, num_classes = labels.max() where
labels.max() + 1 was meant, or 1-based labels do this.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, loss_where


class ClassTargetsOutOfRange(Check):
    __doc__ = __doc__
    code = "KBW046"
    name = "class-targets-out-of-range"
    entry = "head-size-mismatch"
    title = "class targets at or above the number of output units (or negative) at cross_entropy / nll_loss"
    confidence = 0.95

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}  # (where, site, kind) -> [calls, first step, classes, lowest, highest, share]

    def on_loss_input(self, call):
        if call.kind not in ("cross_entropy", "nll_loss"):
            return
        x, y = call.input, call.target
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or x.dim() == 0 \
                or y.is_floating_point() or y.is_complex() or y.numel() == 0:
            return
        classes = x.shape[1] if x.dim() >= 2 else x.shape[0]
        y = y.detach().reshape(-1)
        y = y[y != call.options.get("ignore_index", -100)]
        if y.numel() == 0:
            return
        low, high = int(y.min()), int(y.max())
        if low >= 0 and high < classes:
            return
        share = float(((y < 0) | (y >= classes)).float().mean())
        st = self.sites.setdefault((loss_where(call), call.site, call.kind),
                                   [0, self.session.step, classes, low, high, share])
        st[0] += 1
        st[3], st[4], st[5] = min(st[3], low), max(st[4], high), max(st[5], share)

    def findings(self) -> list:
        out = []
        for (where, site, kind), (calls, step, classes, low, high, share) in self.sites.items():
            needed = max(high + 1, classes)
            message = (f"{kind} got class targets from {low} to {high} for {classes} output units at step {step} "
                       f"({where}; {share:.0%} of the targets out of range): a target must lie in 0..{classes - 1}; "
                       + (f"the head needs {needed} outputs (num_classes = labels.max() + 1), or the labels are "
                          f"1-based and need labels - 1" if low >= 0 else "negative labels need remapping, or "
                          "ignore_index set to the value that marks them"))
            out.append(self.finding(message, where=site, step=step, evidence={
                "calls": calls, "classes": classes, "min_target": low, "max_target": high, "out_of_range_share": share}))
        return out
