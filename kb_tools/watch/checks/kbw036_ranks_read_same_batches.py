"""KBW036: every rank of a distributed run feeds its model the same batches.

Criterion: in a run with a world size above 1, each rank records a fingerprint (shape, dtype,
sum and 8 strided elements) of the first input its model gets with grad enabled on each sampled
step (at most 16 steps); when the ranks' reports are merged, the inputs were identical on every
rank for at least 80% of the (at least 3) sampled steps all ranks recorded. A single rank cannot
tell, so this check reports nothing by itself: the merge of the ranks' reports does
(kb_tools/watch/ranks.py).
"""
from __future__ import annotations

import os

import torch

from kb_tools.watch import ranks
from kb_tools.watch.checks import Check
from kb_tools.watch.checks.tensors import first_tensor, fingerprint


class RanksReadSameBatches(Check):
    __doc__ = __doc__
    code = ranks.CODE
    name = ranks.NAME
    entry = ranks.ENTRY
    title = ranks.TITLE
    confidence = ranks.CONFIDENCE
    cross_rank = True  # its findings come from the merge of the ranks' reports

    def __init__(self, session):
        super().__init__(session)
        self.active = int(os.environ.get("WORLD_SIZE", "1") or 1) > 1
        self.inputs: dict[int, str] = {}
        self.model_site = None

    def on_module_input(self, module, args):
        s = self.session
        if not self.active or s.step in self.inputs or len(self.inputs) >= ranks.KEEP:
            return
        if not torch.is_grad_enabled():
            return
        info = next((m for m in s.models if m.module is module), None)
        tensor = first_tensor(args) if info is not None else None
        if tensor is None:
            return
        self.inputs[s.step] = repr(fingerprint(tensor))
        self.model_site = self.model_site or info.site

    def shared(self) -> dict | None:
        if not self.inputs:
            return None
        return {"inputs": sorted(self.inputs.items()), "model_site": self.model_site}
