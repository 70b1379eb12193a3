"""KBW032: a hand-written update loop (no optimizer object) that never clears the gradients.

Criterion: the run creates no torch optimizer; the tensors that receive gradients (the
watched models' parameters, or else the leaf tensors the first backward() reaches, at most
MAX_LEAVES) change value between consecutive backward() calls (something updates them by hand),
and on at least 3 such pairs the second backward() started from exactly the gradient the first
one left (the same non-zero norm, to a relative 1e-6), with no pair where it started from a
cleared gradient. A loop that calls `.grad.zero_()` or sets `.grad = None` starts from zero and
is not reported; gradient accumulation does not change the values between its backward() calls.
"""
from __future__ import annotations

import math

import torch

from kb_tools.watch.checks import Check, names, plural
from kb_tools.watch.checks.tensors import graph_leaves
from kb_tools.watch.sites import user_site

MIN_CARRIED = 3
MAX_LEAVES = 64
DECIDED_AFTER = 12   # backward() calls looked at; later ones cost nothing


def _norm(tensors) -> float | None:
    grads = [t.grad.detach() for t in tensors if t.grad is not None]
    if not grads:
        return None
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.double()) for g in grads])))


def _values(tensors) -> tuple:
    return tuple(float(t.detach().double().sum()) for t in tensors)


class ManualUpdateGradsNeverCleared(Check):
    __doc__ = __doc__
    code = "KBW032"
    name = "manual-update-grads-never-cleared"
    entry = "optimizer-step-order"
    title = "a hand-written update applies the sum of every gradient so far: nothing clears .grad"
    confidence = 0.88

    def __init__(self, session):
        super().__init__(session)
        self.tracked: list = []
        self.names: list[str] = []
        self.calls = self.carried = self.cleared = 0
        self.after_norm = self.after_values = None
        self.first_norm = self.last_norm = None
        self.first_carried = None  # the backward() call (1-based) that first started from the old gradient
        self.site = None           # where backward() was called from

    def _tensors(self, tensors) -> list:
        if not self.tracked:
            s = self.session
            params = [p for m in s.models if m.module is not None for p in m.module.parameters() if p.requires_grad]
            self.tracked = params[:MAX_LEAVES] if params else graph_leaves(tensors, MAX_LEAVES)
            self.names = [s.param_name(p) if params else f"<{tuple(p.shape)} tensor>" for p in self.tracked]
        return self.tracked

    def on_before_backward(self, tensors):
        if self.calls >= DECIDED_AFTER or self.session.optimizers:
            return
        tracked = self._tensors(tensors)
        if not tracked:
            return
        self.calls += 1
        if self.after_norm is None:
            return
        before = _norm(tracked)
        if _values(tracked) == self.after_values:
            return  # not updated since the last backward(): accumulation, or no update at all
        if not before:
            self.cleared += 1
        elif math.isclose(before, self.after_norm, rel_tol=1e-6):
            self.carried += 1
            if self.first_carried is None:
                self.first_carried, self.site = self.calls, user_site()

    def on_after_backward(self, tensors):
        if self.calls > DECIDED_AFTER or self.session.optimizers or not self.tracked:
            return
        self.after_norm, self.after_values = _norm(self.tracked), _values(self.tracked)
        if self.after_norm:
            self.first_norm = self.first_norm if self.first_norm is not None else self.after_norm
            self.last_norm = self.after_norm

    def findings(self) -> list:
        if self.session.optimizers or self.cleared or self.carried < MIN_CARRIED:
            return []
        growth = self.last_norm / self.first_norm if self.first_norm else float("nan")
        message = (f"no optimizer: {plural(len(self.tracked), 'tensor')} ({names(self.names)}) are updated by hand "
                   f"between backward() calls, and on {self.carried} of {self.calls - 1} backward() calls their "
                   f".grad still held the previous gradient (nothing zeroes it): each update applies the sum of all "
                   f"gradients so far (gradient norm x{growth:.3g} over {self.calls} backward() calls)")
        evidence = {"tensors": self.names[:50], "backward_calls_compared": self.calls - 1,
                    "started_from_previous_gradient": self.carried, "started_cleared": self.cleared,
                    "first_grad_norm": self.first_norm, "last_grad_norm": self.last_norm}
        evidence["first_carried_backward_call"] = self.first_carried
        # no optimizer, so no optimizer step: the step reported is the backward() call
        return [self.finding(message, evidence=evidence, where=self.site, step=self.first_carried)]
