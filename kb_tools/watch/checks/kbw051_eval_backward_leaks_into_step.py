"""KBW051: backward() ran during evaluation and the next training step applied those gradients.

Criterion: backward() is called while every watched model is in eval mode, no optimizer step
follows before a backward() with a model back in training mode, and just before that training
backward() the primary optimizer's parameters still hold a non-zero .grad (checked on up to 8
of them): the training step then applies the training gradient plus every evaluation batch's.
Reported when it happens after at least 1 evaluation; a loop that trains in eval mode (a step
follows the eval-mode backward) or that clears the gradients first is not reported.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, created_at, plural
from kb_tools.watch.sites import user_site

PROBE = 8


class EvalBackwardLeaksIntoStep(Check):
    __doc__ = __doc__
    code = "KBW051"
    name = "eval-backward-leaks-into-step"
    entry = "validation-backward-leak"
    title = "gradients of backward() calls made in eval mode still in .grad at the next training step"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.pending: list | None = None  # [step, eval backward calls, site of the first]
        self.leaks = 0
        self.first: tuple | None = None   # (step, eval backward calls, site)

    def on_any_backward(self, tensors):
        s = self.session
        models = [m for m in (info.module for info in s.models) if m is not None]
        if not models:
            return
        if not any(m.training for m in models):
            if self.pending is None or self.pending[0] != s.step:
                self.pending = [s.step, 0, user_site(depth=4)]
            self.pending[1] += 1
            return
        pending, self.pending = self.pending, None
        if pending is None or pending[0] != s.step:
            return  # no evaluation backward since the last step, or a step came between (training in eval mode)
        opt = s.primary_info().optimizer if s.primary_info() is not None else None
        if opt is None:
            return
        grads = [p.grad for p in s.params_of(opt) if p.grad is not None][:PROBE]
        if not grads or not bool(torch.stack([g.detach().ne(0).any() for g in grads]).any()):
            return
        self.leaks += 1
        if self.first is None:
            self.first = (pending[0], pending[1], pending[2])

    def findings(self) -> list:
        if not self.leaks or self.first is None:
            return []
        step, calls, site = self.first
        where = self.session.where()
        message = (f"backward() ran {plural(calls, 'time')} with the model in eval mode after step {step}"
                   f"{f' (first at {site})' if site else ''}, and the next training backward() found those gradients "
                   f"still in .grad ({plural(self.leaks, 'evaluation')} so far): the "
                   f"{created_at('optimizer', where)} then applies the evaluation batches' gradients too, fitting the "
                   f"validation set; evaluate under torch.no_grad() without backward(), and call zero_grad() "
                   f"before each training backward()")
        return [self.finding(message, where=site, step=step, evidence={
            "evaluations_leaked": self.leaks, "eval_backward_calls": calls, "after_step": step})]
