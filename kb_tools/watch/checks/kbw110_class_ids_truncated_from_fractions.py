"""KBW110: the class-index targets are a float mask scaled like an image and cast to long: the cast
truncates its fractional levels, so several classes become one id (most often all of them 0).

Criterion: on at least MIN_CALLS sampled cross_entropy / nll_loss calls made with grad enabled, and on
every such call whose DataLoader batch holds a floating tensor with as many elements as the integer
target, one of those tensors is a mask scaled into [0, 1] whose truncation is the target: its values
(the first MAX_ELEMENTS) all lie in [0, 1], take between 2 and MAX_LEVELS distinct values (a mask's
levels, not an image's), at least one of them not a whole number, they truncate toward zero to the
target element for element, and the target holds fewer distinct ids than the tensor holds levels.
A preprocessing step that divides every array by its maximum (meant for 0-255 images), or labels
divided by the class count, does this; `.long()` then maps 0.25, 0.5 and 0.75 to 0. Levels that are
all multiples of 1/255 below 1 (ToTensor on an 8-bit mask: every target 0) are KBW099's. Integer-valued float masks cast to
long, masks scaled back before the cast (`(m * 255).round().long()`), continuous values above 1
binned on purpose, and a batch tensor the watched model was fed (its image: the same element count
and sum as one of the model's first inputs) are not reported.
"""
from __future__ import annotations

import weakref

import torch

from kb_tools.watch.checks import Check, loss_where, plural
from kb_tools.watch.checks.tensors import fed_to_model, input_signatures, iter_tensors, signature

MIN_CALLS = 2
MAX_CALLS = 8
MAX_ELEMENTS = 1 << 16
MAX_LEVELS = 32


def _truncated_mask(b: torch.Tensor, t: torch.Tensor):
    """(levels, ids) when `b` is a [0, 1] mask with fractional levels that truncates to `t`, else None."""
    x = b.detach().reshape(-1)[:MAX_ELEMENTS]
    y = t.detach().reshape(-1)[:MAX_ELEMENTS].to(x.device)
    if float(x.min()) < 0 or float(x.max()) > 1:
        return None
    levels = torch.unique(x)
    if not 2 <= levels.numel() <= MAX_LEVELS or bool((levels == levels.trunc()).all()):
        return None
    if float(levels[-1]) < 1 and bool(((levels * 255 - (levels * 255).round()).abs() <= 255e-4).all()):
        return None   # k/255 below 1, all truncated to 0: ToTensor on an 8-bit mask, KBW099's
    if not bool((x.trunc().to(torch.int64) == y.to(torch.int64)).all()):
        return None
    ids = torch.unique(y)
    if ids.numel() >= levels.numel():
        return None
    return levels.tolist(), ids.tolist()


class ClassIdsTruncatedFromFractions(Check):
    __doc__ = __doc__
    code = "KBW110"
    name = "class-ids-truncated-from-fractions"
    entry = "cross-entropy-target-form"
    title = "the class-index targets are a [0, 1]-scaled float mask cast to long: its levels collapse into fewer ids"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.floats: list = []   # weak references to the float tensors of the latest sampled batch
        self.batch_step = None
        self.calls = self.hits = 0
        self.example = None      # (levels, ids, step, where) of the first hit

    def on_batch(self, loader, batch):
        if self.calls >= MAX_CALLS:
            self.floats = []
            return
        self.floats = [weakref.ref(b) for b in iter_tensors(batch) if b.is_floating_point() and b.numel() >= 4]
        self.batch_step = self.session.step

    def on_root_input(self, model, args, grad_enabled):
        if self.floats and grad_enabled and self.batch_step == self.session.step:
            fed = input_signatures(args)
            sizes = {n for n, _ in fed}
            self.floats = [ref for ref in self.floats if ref() is not None
                           and (ref().numel() not in sizes or not fed_to_model(signature(ref()), fed))]

    def on_loss(self, call):
        t = call.target
        if call.kind not in ("cross_entropy", "nll_loss") or not call.grad_enabled or self.calls >= MAX_CALLS \
                or not self.floats or self.batch_step != self.session.step or not isinstance(t, torch.Tensor) \
                or t.is_floating_point() or t.dtype == torch.bool or t.numel() < 4:
            return
        candidates = [b for b in (ref() for ref in self.floats) if b is not None and b.numel() == t.numel()]
        if not candidates:
            return
        self.calls += 1
        for b in candidates:
            found = _truncated_mask(b, t)
            if found is not None:
                self.hits += 1
                if self.example is None:
                    self.example = (*found, self.session.step, loss_where(call), call.site)
                return

    def findings(self) -> list:
        if self.hits < MIN_CALLS or self.hits < self.calls or self.example is None:
            return []
        levels, ids, step, where, site = self.example
        shown = ", ".join(f"{v:.4g}" for v in levels[:6]) + (", ..." if len(levels) > 6 else "")
        message = (f"the class-index targets ({where}) are a float mask of the batch cast to long on {self.hits} of "
                   f"{plural(self.calls, 'sampled call')}: its values lie in [0, 1] with {len(levels)} levels "
                   f"({shown}) and truncate to {plural(len(ids), 'id')} ({', '.join(str(i) for i in ids[:6])}): the "
                   f"mask was scaled like an image (ToTensor divides by 255, or a division by its maximum) and the cast "
                   f"merges its classes; load masks as integer class ids (torch.as_tensor(np.array(mask), "
                   f"dtype=torch.long)) and never normalise them")
        return [self.finding(message, where=site, step=step, evidence={
            "calls": self.hits, "levels": levels[:16], "ids": ids[:16]})]
