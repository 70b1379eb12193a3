"""KBW018: training batches that each hold one or two classes, a different one from batch to batch.

Criterion: at one cross_entropy / nll_loss site, on at least 8 consecutive sampled calls made
with grad enabled, each with one class-index target per sample (a 1-D target) and at least 8
targets, every batch holds at most 2 distinct classes while the logits have C >= 4 classes,
and the most frequent class of those batches takes at least 3 different values over the run.
A shuffled loader puts nearly every class in a batch of 8 or more samples when C is small
(2 or fewer of 4 classes in a batch of 8 happens about 2% of the time, 8 times in a row
practically never), so this is a dataset stored sorted by class and read in order (a training
DataLoader left at shuffle=False). Imbalanced data, where one majority class dominates every
batch, does not change its most frequent class and is not reported.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, created_at, loss_where

MIN_RUN = 8
MIN_TARGETS = 8
MIN_CLASSES = 4
MAX_DISTINCT = 2
MIN_DOMINANT = 3
MAX_TRACKED = 16  # dominant classes remembered per run (only the count up to MIN_DOMINANT matters)


class _Site:
    __slots__ = ("run", "run_start", "dominant", "best", "loader")

    def __init__(self):
        self.run = 0                 # consecutive low-diversity calls
        self.run_start = None        # step of the first of them
        self.dominant: set = set()   # their most frequent classes (bounded)
        self.best = None             # (run length, dominant classes, first step, classes C, targets, loader site)
        self.loader = None


class BatchesSortedByLabel(Check):
    __doc__ = __doc__
    code = "KBW018"
    name = "batches-sorted-by-label"
    entry = "train-shuffle-off"
    title = "training batches of one or two classes, changing class from batch to batch: data read in class order"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}
        self.loader_site = None  # where the loader of the last sampled batch was created

    def on_batch(self, loader, batch):
        self.loader_site = self.session.loader_site(loader)

    def on_loss(self, call):
        if call.kind not in ("cross_entropy", "nll_loss") or not call.grad_enabled:
            return
        x, y = call.input, call.target
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or x.dim() != 2 or y.dim() != 1 \
                or y.is_floating_point() or y.shape[0] != x.shape[0]:
            return
        classes = x.shape[1]
        key = (loss_where(call), call.site)
        st = self.sites.get(key)
        if st is None:
            if len(self.sites) >= 32:
                return
            st = self.sites[key] = _Site()
        y = y.detach()
        y = y[y != call.options.get("ignore_index", -100)]
        if classes < MIN_CLASSES or y.numel() < MIN_TARGETS:
            st.run, st.dominant = 0, set()
            return
        values, counts = torch.unique(y, return_counts=True)
        if values.numel() > MAX_DISTINCT:
            st.run, st.dominant = 0, set()
            return
        if st.run == 0:
            st.run_start, st.loader = self.session.step, self.loader_site
        st.run += 1
        if len(st.dominant) < MAX_TRACKED:
            st.dominant.add(int(values[counts.argmax()]))
        if st.run >= MIN_RUN and len(st.dominant) >= MIN_DOMINANT and \
                (st.best is None or st.run > st.best[0]):
            st.best = (st.run, len(st.dominant), st.run_start, classes, int(y.numel()), st.loader)

    def findings(self) -> list:
        out = []
        for (where, site), st in self.sites.items():
            if st.best is None:
                continue
            run, dominant, step, classes, targets, loader = st.best
            source = f" ({created_at('loader', loader)})" if loader else ""
            message = (f"{run} consecutive sampled training batches from step {step} each held at most "
                       f"{MAX_DISTINCT} of the {classes} classes ({targets} targets per batch, {where}), and their "
                       f"most frequent class took {dominant} different values: the training data is read in "
                       f"class order; shuffle the training DataLoader{source}")
            out.append(self.finding(message, where=loader or site, step=step, evidence={
                "run": run, "dominant_classes": dominant, "classes": classes, "targets": targets,
                "loader": loader}))
        return out
