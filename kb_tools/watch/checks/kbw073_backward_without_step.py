"""KBW073: backward() runs again and again, and no optimizer ever steps.

Criterion: by the end of the run, backward() ran at least 20 times, an optimizer exists whose
parameters got gradients, no optimizer's step() ever ran, and those parameters are unchanged from
the first backward() to the end (no hand-written update moved them either). A training loop that
computes the loss and its gradients but never calls optimizer.step() (a refactor that dropped it,
a trainer whose step lives in a callback that is never registered) trains nothing, and its loss
stays where it started. Gradient accumulation over more than 20 micro-batches before the first
step of a short run would look the same, and the message says so.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, created_at, plural
from kb_tools.watch.checks.tensors import value_fingerprint

MIN_BACKWARD = 20
TRACKED = 8  # parameters fingerprinted at the first backward


class BackwardWithoutStep(Check):
    __doc__ = __doc__
    code = "KBW073"
    name = "backward-without-step"
    entry = "optimizer-step-order"
    title = "backward() runs at least 20 times and no optimizer.step() ever does"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.tracked = None   # (optimizer info, [(parameter, fingerprint)]) taken at the first backward with gradients
        self.unchanged = None

    def on_after_backward(self, tensors):
        s = self.session
        if self.tracked is not None or any(info.steps for info in s.optimizers.values()):
            return
        for opt in s.live_optimizers():
            params = [p for p in s.params_of(opt) if p.grad is not None][:TRACKED]
            if params:
                self.tracked = (s.optimizer_info(opt), [(p, value_fingerprint(p)) for p in params])
                return

    def on_end(self):
        if self.tracked is not None:
            self.unchanged = all(value_fingerprint(p) == fp for p, fp in self.tracked[1])
            self.tracked = (self.tracked[0], [])  # no parameter held past the run

    def findings(self) -> list:
        s = self.session
        if (self.tracked is None or not self.unchanged or s.backward_calls < MIN_BACKWARD
                or any(info.steps for info in s.optimizers.values())):
            return []
        info = self.tracked[0]
        name = f"{info.cls} ({created_at('optimizer', info.site)})" if info else "the optimizer"
        message = (f"backward() ran {plural(s.backward_calls, 'time')} and no optimizer.step() ran at all: {name} holds "
                   f"the parameters the gradients were computed for, and they never changed, so nothing is trained; "
                   f"call optimizer.step() after backward() (and zero_grad() before the next one), unless the run "
                   f"accumulates more than {s.backward_calls} micro-batches before its first step")
        return [self.finding(message, where=info.site if info else None, step=0, evidence={
            "backward_calls": s.backward_calls, "optimizer": info.cls if info else None,
            "optimizer_site": info.site if info else None})]
