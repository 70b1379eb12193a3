"""KBW099: class-index targets that are a label mask scaled to [0, 1] (ToTensor on an 8-bit mask)
and then truncated by .long(): every class id k became k/255, and then 0.

Criterion: at one cross_entropy / nll_loss site, on at least MIN_CALLS sampled grad-enabled calls,
the integer targets (at least MIN_TARGETS values, ignore_index left out) are all 0, while the
DataLoader batch of the same step holds a floating tensor with as many values as the targets whose
values all lie in [0, 1), are all whole multiples of 1/255 (within 1e-4 of k/255), and are not all 0:
the mask's class ids, divided by 255 on the way, which the cast to an integer dtype turned into
background everywhere. A mask that really holds only background has no nonzero value and is not
counted; targets computed from a float batch by rounding (`.round().long()`) keep their classes and
are not all 0. A batch tensor the watched model was fed (an 8-bit image scaled by 1/255, the same
element count and sum as one of the model's first inputs) is no mask and is not counted.
"""
from __future__ import annotations

import itertools

import torch

from kb_tools.watch.checks import Check, loss_where, plural
from kb_tools.watch.checks.tensors import fed_to_model, input_signatures, iter_tensors, signature

MIN_CALLS = 3
MIN_TARGETS = 64
MAX_BATCH_TENSORS = 16
MAX_VALUES = 1 << 24
MAX_SITES = 16
STEP = 1 / 255


def _scaled_mask(t: torch.Tensor) -> int | None:
    """The largest class id k of a floating tensor whose values are all k/255 with 0 <= k < 255 and
    not all 0, else None."""
    if not t.is_floating_point() or t.numel() == 0 or t.numel() > MAX_VALUES:
        return None
    v = t.detach().float() * 255
    if not bool(torch.isfinite(v).all()):
        return None  # a NaN or inf is no mask (and no class id)
    top = float(v.max())
    if float(v.min()) < -1e-3 or top >= 254.5 or top < 0.5:
        return None
    if float((v - v.round()).abs().max()) > 255e-4:
        return None
    return int(round(top))


class ClassMasksScaledThenTruncated(Check):
    __doc__ = __doc__
    code = "KBW099"
    name = "class-masks-scaled-then-truncated"
    entry = "integer-division-inputs"
    title = "class targets all 0 where the batch's mask held class ids scaled by 1/255: ToTensor on a label mask"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.masks: list = []     # (numel, largest class id, signature) of the scaled-mask tensors of this step's batch
        self.batch_step = None
        self.sites: dict = {}     # (kind, where, site) -> [calls, targets, first step, largest id, loader site]
        self.loader_site = None

    def on_batch(self, loader, batch):
        masks = []
        for t in itertools.islice(iter_tensors(batch), MAX_BATCH_TENSORS):
            if t.dim() >= 2:
                top = _scaled_mask(t)
                if top is not None:
                    masks.append((t.numel(), top, signature(t)))
        self.masks, self.batch_step = masks, self.session.step
        self.loader_site = self.session.loader_site(loader)

    def on_root_input(self, model, args, grad_enabled):
        if self.masks and grad_enabled and self.batch_step == self.session.step:
            fed = input_signatures(args)
            self.masks = [m for m in self.masks if not fed_to_model(m[2], fed)]

    def on_loss(self, call):
        if not call.grad_enabled or call.kind not in ("cross_entropy", "nll_loss") or not self.masks \
                or self.batch_step != self.session.step:
            return
        y = call.target
        if not isinstance(y, torch.Tensor) or y.is_floating_point() or y.numel() < MIN_TARGETS:
            return
        match = [top for numel, top, _ in self.masks if numel == y.numel()]
        if not match:
            return
        kept = y.detach().reshape(-1)
        kept = kept[kept != call.options.get("ignore_index", -100)]
        if kept.numel() < MIN_TARGETS or bool((kept != 0).any()):
            return
        key = (call.kind, loss_where(call), call.site)
        st = self.sites.get(key)
        if st is None:
            if len(self.sites) >= MAX_SITES:
                return
            st = self.sites[key] = [0, 0, self.session.step, 0, self.loader_site]
        st[0] += 1
        st[1] += int(kept.numel())
        st[3] = max(st[3], max(match))

    def findings(self) -> list:
        out = []
        for (kind, where, site), (calls, targets, first, top, loader) in self.sites.items():
            if calls < MIN_CALLS:
                continue
            source = f" (DataLoader created at {loader})" if loader else ""
            message = (f"{kind} ({where}) got class targets that were all 0 on {plural(calls, 'sampled call')} from "
                       f"step {first} ({targets} targets), while the batch{source} held a float mask of as many "
                       f"values made of class ids divided by 255 (up to {top}/255): the label masks went through "
                       f"ToTensor (or another /255 scaling) and .long() truncated every class to background; convert "
                       f"masks with torch.as_tensor(np.array(mask), dtype=torch.long) (or PILToTensor), never ToTensor")
            out.append(self.finding(message, where=site, step=first, evidence={
                "calls": calls, "targets": targets, "largest_scaled_class_id": top}))
        return out
