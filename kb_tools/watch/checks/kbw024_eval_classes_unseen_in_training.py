"""KBW024: evaluation targets of classes that never appear among the training targets.

Criterion: for classification losses (cross_entropy, nll_loss) with C classes (2 <= C <= 1000),
class-index targets are collected on sampled calls: those made with grad enabled (training)
and those made without (evaluation), rows with ignore_index left out. Once at least
max(200, 20 x C) training targets have been seen and at least 50 evaluation targets, the
evaluation targets whose class never appeared in training make up at least 20% of them.
With that many training targets every class that is not vanishingly rare shows up; a
validation split that holds whole classes training never saw is the slice of a dataset
stored sorted by class (data[:n] / data[n:], Subset(ds, range(n))).
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, names

MAX_CLASSES = 1000
MIN_TRAIN = 200
PER_CLASS = 20
MIN_EVAL = 50
SHARE = 0.2


class _Classes:
    __slots__ = ("train", "train_seen", "eval_counts", "eval_seen", "eval_step", "eval_site", "train_site")

    def __init__(self):
        self.train: set = set()        # classes seen in training targets (at most C)
        self.train_seen = 0            # training targets counted
        self.eval_counts: dict = {}    # class -> evaluation targets (at most C keys)
        self.eval_seen = 0
        self.eval_step = None
        self.eval_site = None
        self.train_site = None


class EvalClassesUnseenInTraining(Check):
    __doc__ = __doc__
    code = "KBW024"
    name = "eval-classes-unseen-in-training"
    entry = "class-sorted-validation-split"
    title = "evaluation targets of classes that no training target had: a class-sorted dataset split by slicing"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.by_classes: dict = {}  # C -> _Classes

    def on_loss(self, call):
        if call.kind not in ("cross_entropy", "nll_loss"):
            return
        x, y = call.input, call.target
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or x.dim() < 1 \
                or y.is_floating_point() or y.numel() == 0:
            return
        classes = x.shape[1] if x.dim() >= 2 else x.shape[0]
        if classes < 2 or classes > MAX_CLASSES:
            return
        y = y.detach().reshape(-1)
        y = y[(y != call.options.get("ignore_index", -100)) & (y >= 0) & (y < classes)]
        if y.numel() == 0:
            return
        st = self.by_classes.get(classes)
        if st is None:
            if len(self.by_classes) >= 16:
                return
            st = self.by_classes[classes] = _Classes()
        values, counts = torch.unique(y, return_counts=True)
        if call.grad_enabled:
            st.train.update(values.tolist())
            st.train_seen += y.numel()
            if st.train_site is None:
                st.train_site = call.site
        else:
            for value, count in zip(values.tolist(), counts.tolist()):
                st.eval_counts[value] = st.eval_counts.get(value, 0) + count
            st.eval_seen += y.numel()
            if st.eval_step is None:
                st.eval_step, st.eval_site = self.session.step, call.site

    def findings(self) -> list:
        out = []
        for classes, st in self.by_classes.items():
            if st.train_seen < max(MIN_TRAIN, PER_CLASS * classes) or st.eval_seen < MIN_EVAL:
                continue
            unseen = sorted(c for c in st.eval_counts if c not in st.train)
            share = sum(st.eval_counts[c] for c in unseen) / st.eval_seen
            if not unseen or share < SHARE:
                continue
            message = (f"{share:.0%} of {st.eval_seen} evaluation targets (grad disabled, first at step {st.eval_step}, "
                       f"{st.eval_site}) belong to class{'es' if len(unseen) > 1 else ''} "
                       f"{names([str(c) for c in unseen], 6)} of the {classes}, which never appeared among "
                       f"{st.train_seen} training targets: the validation split holds classes training never saw; "
                       f"split with a seeded random permutation (or stratified), not by slicing data sorted by class")
            out.append(self.finding(message, where=st.eval_site, step=st.eval_step, evidence={
                "classes": classes, "unseen_classes": unseen[:50], "unseen_share": share,
                "eval_targets": st.eval_seen, "train_targets": st.train_seen,
                "train_classes": sorted(st.train)[:50]}))
        return out
