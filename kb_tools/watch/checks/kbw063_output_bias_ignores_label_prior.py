"""KBW063: the first classification loss is the loss of a uniform guess, on labels whose prior is far from uniform.

Criterion: at one cross_entropy site with class-index targets and 2 to MAX_CLASSES classes, or
one binary_cross_entropy_with_logits site with 0/1 targets, reduction "mean", no class weight,
pos_weight or label smoothing: the first sampled call, before any optimizer step, returned
within 25% of U, the loss of a uniform prediction (ln C, or ln 2 per binary label); and the
targets of the sampled calls up to step PRIOR_STEPS (at least MIN_TARGETS of them, at least two
classes, the rarest present at 1% or more) have an entropy H of at most half of U. An output
layer left at its default init predicts about uniformly, so the first steps are spent learning
the label prior (a hockey-stick loss curve from U down to about H); a bias set to the log prior
starts the loss at H. A weighted loss is left alone: the user has addressed the imbalance.
"""
from __future__ import annotations

import math

import torch

from kb_tools.watch.checks import Check, loss_where

MAX_CLASSES = 100
PRIOR_STEPS = 10
MIN_TARGETS = 256
NEAR_UNIFORM = 0.25
PRIOR_SHARE = 0.5
MIN_RARE = 0.01
MAX_SITES = 16


def _entropy(p: torch.Tensor) -> float:
    p = p[p > 0]
    return float(-(p * p.log()).sum())


class _Site:
    __slots__ = ("kind", "first_loss", "uniform", "counts", "positives", "total", "where", "ok")

    def __init__(self, kind: str, where: str):
        self.kind, self.where, self.ok = kind, where, True
        self.first_loss = self.uniform = None
        self.counts = None      # cross_entropy: targets per class
        self.positives = None   # binary: positive targets per label (column)
        self.total = 0          # targets counted (binary: rows)


class OutputBiasIgnoresLabelPrior(Check):
    __doc__ = __doc__
    code = "KBW063"
    name = "output-bias-ignores-label-prior"
    entry = "final-layer-bias-init"
    title = "the first loss is a uniform guess's, on labels whose prior is far from uniform: set the output bias"
    confidence = 0.5

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}

    def _weighted(self, call) -> bool:
        o = call.options
        return any(o.get(k) is not None for k in ("weight", "pos_weight")) or bool(o.get("label_smoothing") or 0)

    def on_loss(self, call):
        s = self.session
        if call.kind not in ("cross_entropy", "binary_cross_entropy_with_logits") or not call.grad_enabled \
                or call.reduction != "mean" or s.step > PRIOR_STEPS:
            return
        key = (call.kind, loss_where(call), call.site)
        site = self.sites.get(key)
        if site is None:
            if len(self.sites) >= MAX_SITES or not call.first or any(i.steps for i in s.optimizers.values()):
                return  # the first call of a site must come before any step
            site = self.sites[key] = _Site(call.kind, loss_where(call))
        if not site.ok:
            return
        x, y, out = call.input, call.target, call.output
        if self._weighted(call) or not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) \
                or not x.is_floating_point() or x.dim() == 0:
            site.ok = False
            return
        with torch.no_grad():
            if call.kind == "cross_entropy":
                classes = x.shape[1] if x.dim() >= 2 else x.shape[0]
                if y.is_floating_point() or not 2 <= classes <= MAX_CLASSES:
                    site.ok = False
                    return
                t = y.detach().reshape(-1)
                t = t[t != call.options.get("ignore_index", -100)]
                if t.numel() and (int(t.min()) < 0 or int(t.max()) >= classes):
                    site.ok = False  # out of range: KBW046's case
                    return
                counts = torch.bincount(t.cpu(), minlength=classes).double()
                if site.counts is not None and site.counts.shape != counts.shape:
                    site.ok = False  # one call site serving heads of different sizes: no single prior
                    return
                site.counts = counts if site.counts is None else site.counts + counts
                site.total += int(t.numel())
                uniform = math.log(classes)
            else:
                if y.shape != x.shape:
                    site.ok = False
                    return
                t = y.detach().reshape(-1, x.shape[-1] if x.dim() >= 2 else 1).cpu().double()
                if not bool(((t == 0) | (t == 1)).all()):
                    site.ok = False  # soft labels: no class prior to speak of
                    return
                positives = t.sum(0)
                if site.positives is not None and site.positives.shape != positives.shape:
                    site.ok = False
                    return
                site.positives = positives if site.positives is None else site.positives + positives
                site.total += t.shape[0]
                uniform = math.log(2)
            if site.first_loss is None and isinstance(out, torch.Tensor) and out.numel() == 1:
                site.first_loss, site.uniform = float(out.detach()), uniform

    def _prior_entropy(self, site: _Site) -> float | None:
        """The entropy of the label prior (per binary label, averaged), or None when it is degenerate."""
        if site.kind == "cross_entropy":
            if site.counts is None or site.total < MIN_TARGETS:
                return None
            p = site.counts / site.counts.sum()
            present = p[p > 0]
            if len(present) < 2 or float(present.min()) < MIN_RARE:
                return None
            return _entropy(p)
        if site.positives is None or site.total < MIN_TARGETS:
            return None
        rate = site.positives / site.total
        if bool(((rate < MIN_RARE) | (rate > 1 - MIN_RARE)).any()):
            return None  # a label (nearly) always or never on: no bias can be read for it
        return float(sum(_entropy(torch.stack([r, 1 - r])) for r in rate) / len(rate))

    def findings(self) -> list:
        out = []
        for site in self.sites.values():
            if not site.ok or site.first_loss is None or not math.isfinite(site.first_loss):
                continue
            if abs(site.first_loss - site.uniform) > NEAR_UNIFORM * site.uniform:
                continue
            prior = self._prior_entropy(site)
            if prior is None or prior > PRIOR_SHARE * site.uniform:
                continue
            kind = "cross_entropy" if site.kind == "cross_entropy" else "binary_cross_entropy_with_logits"
            message = (f"the first {kind} loss, before any step, was {site.first_loss:.3g}, the loss of a uniform "
                       f"guess ({site.uniform:.3g}), while the first {site.total} targets have a label entropy of "
                       f"{prior:.3g} ({site.where}): the untrained output layer ignores the label "
                       f"prior, so the first steps only learn it (a hockey-stick loss from {site.uniform:.2g} "
                       f"down to about {prior:.2g}); set the output bias to the log prior before training")
            out.append(self.finding(message, step=0, evidence={
                "first_loss": round(site.first_loss, 4), "uniform_loss": round(site.uniform, 4),
                "prior_entropy": round(prior, 4), "targets": site.total}))
        return out
