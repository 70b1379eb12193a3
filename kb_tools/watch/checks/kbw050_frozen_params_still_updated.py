"""KBW050: parameters frozen with requires_grad=False that the optimizer still changes.

Criterion: on at least 2 sampled steps, a parameter with requires_grad=False that an optimizer
holds has values (its first 64) that differ after that optimizer's step() from before it. An
optimizer never reads requires_grad: a tensor frozen after it got a .grad, whose gradient is
zero-filled instead of set to None, still gets weight decay and the momentum or Adam moments
built up before the freeze. A frozen parameter the optimizer skips (its .grad is None) is not
reported.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, created_at, names, plural
from kb_tools.watch.checks.tensors import leading_values

MIN_STEPS = 2
ELEMENTS = 64
MAX_TRACKED = 256


class FrozenParamsStillUpdated(Check):
    __doc__ = __doc__
    code = "KBW050"
    name = "frozen-params-still-updated"
    entry = "frozen-params-in-optimizer"
    title = "parameters with requires_grad=False that optimizer.step() still changes"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.before: dict = {}   # id(optimizer) -> [(param, its first values)]
        self.moved: dict = {}    # param name -> [steps seen moving, first step, optimizer site]

    def on_step_pre(self, optimizer):
        frozen = []
        for group in optimizer.param_groups:
            for p in group["params"]:
                if not p.requires_grad and p.grad is not None and p.numel() > 0:
                    frozen.append((p, leading_values(p, ELEMENTS).clone()))
                    if len(frozen) >= MAX_TRACKED:
                        break
        if frozen:
            self.before[id(optimizer)] = frozen

    def on_step_post(self, optimizer):
        frozen = self.before.pop(id(optimizer), None)
        if not frozen:
            return
        s = self.session
        for p, values in frozen:
            if not torch.equal(leading_values(p, ELEMENTS), values):
                st = self.moved.setdefault(s.param_name(p), [0, s.step, s.where(optimizer)])
                st[0] += 1

    def on_end(self):
        self.before.clear()  # hold no parameter past the run

    def findings(self) -> list:
        moved = {name: st for name, st in self.moved.items() if st[0] >= MIN_STEPS}
        if not moved:
            return []
        listed = sorted(moved)
        first = min(st[1] for st in moved.values())
        where = next(iter(moved.values()))[2]
        message = (f"{plural(len(listed), 'parameter')} with requires_grad=False ({names(listed)}) changed at "
                   f"step() on up to {max(st[0] for st in moved.values())} sampled steps from step {first}: the "
                   f"{created_at('optimizer', where)} still holds them with a zero-filled .grad, so weight decay "
                   f"and the momentum from before the freeze keep moving them; give the optimizer only trainable "
                   f"parameters (or rebuild it when freezing), or set their .grad to None")
        return [self.finding(message, where=where, step=first, evidence={
            "parameters": listed[:50], "count": len(listed), "first_step": first})]
