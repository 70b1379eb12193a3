"""KBW064: the model's input is what floor division left of an integer batch: mostly zeros.

Criterion: on at least MIN_STEPS sampled steps, the first tensor a DataLoader yielded is an
integer tensor (at least 64 values) whose values run from 0 to at least 16 with at least 5%
strictly between 0 and its maximum, and the watched model's input in the same step is a float
tensor of as many values, holding only 0 and 1, with exactly as many ones as that batch has
values at or above a floor-division divisor d (255, 256, or the batch's maximum): the input is
`batch // d` (in any layout), every intensity below d truncated to 0. A threshold applied on
purpose (`(x > 127).float()`) keeps another count of ones and is not reported.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, created_at
from kb_tools.watch.checks.tensors import first_tensor

MIN_STEPS = 2
MIN_VALUES = 64
MIN_RANGE = 16
MIN_MIDDLE = 0.05
_INTEGER = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


class IntegerDivisionInputs(Check):
    __doc__ = __doc__
    code = "KBW064"
    name = "integer-division-inputs"
    entry = "integer-division-inputs"
    title = "the model's input is an integer batch floor-divided to 0s and 1s: the intensities are gone"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.pending = None  # (step, loader site, {divisor: ones that batch // divisor holds}, values)
        self.first_step = None  # the first sampled step where the input matched
        self.matches = 0
        self.evidence: dict = {}

    def on_batch(self, loader, batch):
        self.pending = None
        t = first_tensor(batch)
        if t is None or t.dtype not in _INTEGER or t.numel() < MIN_VALUES or t.dim() < 2:
            return
        with torch.no_grad():
            low, high = int(t.min()), int(t.max())
            if low != 0 or high < MIN_RANGE:
                return
            middle = float(((t > 0) & (t < high)).float().mean())
            if middle < MIN_MIDDLE:
                return
            ones = {d: int((t >= d).sum()) for d in sorted({255, 256, high})}
        self.pending = (self.session.step, self.session.loader_site(loader), ones, t.numel(), high)

    def on_module_input(self, module, args):
        s = self.session
        if self.pending is None or not s.is_model(module):
            return
        step, site, ones, values, high = self.pending
        self.pending = None  # one model input per batch
        x = args[0] if args else None
        if step != s.step or not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() != values:
            return
        with torch.no_grad():
            low, top, total = (float(v) for v in torch.stack([x.min(), x.max(), x.sum()]).float().tolist())
            if low != 0 or top > 1 or not bool((x == x.round()).all()):
                return
            matched = [d for d, n in ones.items() if n == int(total)]
            if not matched:
                return
            zeros = 1.0 - total / values
        self.matches += 1
        if self.first_step is None:
            self.first_step = step
        self.evidence = {"divisor": matched[0], "batch_max": high, "input_zero_share": round(zeros, 4),
                         "loader_site": site, "sampled_steps": self.matches, "first_step": self.first_step}

    def on_end(self):
        self.pending = None

    def findings(self) -> list:
        if self.matches < MIN_STEPS:
            return []
        e = self.evidence
        where = created_at("DataLoader", e["loader_site"])
        message = (f"the model's input was the integer batch from the {where} floor-divided by {e['divisor']} "
                   f"(values 0 to {e['batch_max']} in, only 0 and 1 out; {e['input_zero_share']:.0%} of the input "
                   f"is 0) on {self.matches} sampled steps from step {self.first_step}: integer division drops "
                   f"every intensity below {e['divisor']}; convert first, then scale: x.float() / {e['divisor']}")
        return [self.finding(message, where=e["loader_site"], step=self.first_step, evidence=dict(e))]
