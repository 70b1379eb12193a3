"""KBW069: every training target the classification loss saw is the same class.

Criterion: at one cross_entropy / nll_loss site (class-index targets, logits of C >= 2 classes) or
binary_cross_entropy(_with_logits) site (0/1 targets shaped like the input), on at least
MIN_CALLS sampled grad-enabled calls with at least MIN_TARGETS targets in all (ignore_index left
out), every target had one and the same value; and on each of those calls the targets were the
labels of the DataLoader batch of that step (a tensor of the batch holds the same values), from a
loader that does not read its data in order. A label mapping that sends every example to one class
(a string compared with an integer, a folder-to-class dict that lost a key) does this; so does a
class rarer than about 1 in MIN_TARGETS, which the message says. Targets built in the loop
(a GAN's all-ones, a distillation target) are not a batch's labels and are not counted; a loader in
class order is KBW018's case. The entry's other form, labels paired with the wrong inputs (one side
shuffled or offset), looks like any labels to a run and is not seen.
"""
from __future__ import annotations

import itertools

import torch
from torch.utils.data import SequentialSampler

from kb_tools.watch.checks import Check, created_at, loss_where
from kb_tools.watch.checks.tensors import iter_tensors

MIN_CALLS = 8
MIN_TARGETS = 256  # 14 sampled calls of 50 steps at batch 32 give 448
MAX_SITES = 16
MAX_BATCH_TENSORS = 16


class _Site:
    __slots__ = ("calls", "targets", "value", "mixed", "first_step", "loader")

    def __init__(self):
        self.calls = self.targets = 0
        self.value = None       # the one target value seen so far
        self.mixed = False      # two values seen, or a call whose targets were not the batch's labels
        self.first_step = None
        self.loader = None


class TargetsAllOneClass(Check):
    __doc__ = __doc__
    code = "KBW069"
    name = "targets-all-one-class"
    entry = "label-misalignment"
    title = "every training target of a classification loss is the same class: the labels carry no signal"
    confidence = 0.7

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}
        self.batch: list = []   # the tensors of the last sampled batch (the user's loop holds them anyway)
        self.batch_step = None
        self.loader_site = None
        self.in_order = False

    def on_batch(self, loader, batch):
        self.batch = [t for t in itertools.islice(iter_tensors(batch), MAX_BATCH_TENSORS)
                      if t.dim() <= 2 and 0 < t.numel() <= 1 << 20]
        self.batch_step = self.session.step
        self.in_order = isinstance(getattr(loader, "sampler", None), SequentialSampler)
        self.loader_site = self.session.loader_site(loader)

    def _labels(self, call):
        """The targets as a 1-D tensor when the call is a classification loss on class labels, else None."""
        x, y = call.input, call.target
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or y.numel() == 0:
            return None
        if call.kind in ("cross_entropy", "nll_loss"):
            if y.is_floating_point() or x.dim() != 2 or y.dim() != 1 or x.shape[0] != y.shape[0] or x.shape[1] < 2:
                return None
            y = y.detach()
            return y[y != call.options.get("ignore_index", -100)]
        if call.kind in ("binary_cross_entropy", "binary_cross_entropy_with_logits"):
            if y.shape != x.shape or x.dim() > 2 or (x.dim() == 2 and x.shape[1] != 1):
                return None
            y = y.detach().reshape(-1)
            return y if bool(((y == 0) | (y == 1)).all()) else None
        return None

    def _from_batch(self, labels: torch.Tensor) -> bool:
        if self.batch_step != self.session.step or self.in_order:
            return False
        flat = labels.double()
        for t in self.batch:
            if t.numel() == flat.numel() and not t.is_complex() and t.device == labels.device \
                    and bool((t.detach().reshape(-1).double() == flat).all()):
                return True
        return False

    def on_loss(self, call):
        if not call.grad_enabled or call.kind not in ("cross_entropy", "nll_loss", "binary_cross_entropy",
                                                      "binary_cross_entropy_with_logits"):
            return
        labels = self._labels(call)
        if labels is None or labels.numel() == 0:
            return
        key = (call.kind, loss_where(call), call.site)
        st = self.sites.get(key)
        if st is None:
            if len(self.sites) >= MAX_SITES:
                return
            st = self.sites[key] = _Site()
        if st.mixed:
            return
        first = labels.reshape(-1)[0]
        if not bool((labels == first).all()) or not self._from_batch(labels):
            st.mixed = True
            return
        value = float(first)
        if st.value is not None and value != st.value:
            st.mixed = True
            return
        st.value = value
        st.calls += 1
        st.targets += int(labels.numel())
        if st.first_step is None:
            st.first_step, st.loader = self.session.step, self.loader_site

    def findings(self) -> list:
        out = []
        for (kind, where, site), st in self.sites.items():
            if st.mixed or st.calls < MIN_CALLS or st.targets < MIN_TARGETS:
                continue
            value = int(st.value) if float(st.value).is_integer() else st.value
            source = f", {created_at('loader', st.loader)}" if st.loader else ""
            message = (f"every one of the {st.targets} training targets {kind} saw on {st.calls} sampled steps from "
                       f"step {st.first_step} was {value}, each time the labels of the loader's batch "
                       f"({where}{source}): the labels carry no signal, so the loss falls to 0 and accuracy reads "
                       f"100% whatever the inputs. Print a few labels as the dataset yields them; a mapping that "
                       f"sends every example to one class (a string compared with an integer, a dict that lost a "
                       f"key) does this, and so does a class rarer than 1 in {st.targets}")
            out.append(self.finding(message, where=site, step=st.first_step, evidence={
                "kind": kind, "target": value, "targets": st.targets, "calls": st.calls, "loader": st.loader}))
        return out
