"""KBW077: optimizer.step() runs again and again, and backward() never does: every step is a no-op.

Criterion: by the end of the run, an optimizer stepped at least MIN_STEPS times, backward() never
ran in the whole run, and on every sampled step none of that optimizer's parameters held a gradient
when step() began (torch's optimizers skip a parameter whose .grad is None, so nothing moved). A
loop whose backward() was commented out or moved behind a condition that is never true keeps
printing a loss that never falls. Gradients written by hand (p.grad = ...) or by an LBFGS closure
keep the check silent.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, created_at, plural

MIN_STEPS = 20


class StepWithoutBackward(Check):
    __doc__ = __doc__
    code = "KBW077"
    name = "step-without-backward"
    entry = "optimizer-step-order"
    title = "optimizer.step() runs at least 20 times and backward() never does: no parameter has a gradient"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.steps: dict = {}   # id(optimizer info) -> [sampled steps seen, sampled steps with a gradient, info]

    def on_step_pre(self, optimizer):
        info = self.session.optimizer_info(optimizer)
        if info is None:
            return
        st = self.steps.setdefault(id(info), [0, 0, info])
        st[0] += 1
        if any(p.grad is not None for p in self.session.params_of(optimizer)):
            st[1] += 1

    def findings(self) -> list:
        s = self.session
        if s.backward_calls:
            return []
        out = []
        for sampled, with_grad, info in self.steps.values():
            if with_grad or not sampled or info.steps < MIN_STEPS:
                continue
            message = (f"{info.cls} ({created_at('optimizer', info.site)}) stepped {plural(info.steps, 'time')} and "
                       f"backward() never ran: on all {plural(sampled, 'sampled step')} none of its parameters had "
                       f"a gradient, and an optimizer skips a parameter without one, so nothing was trained; call "
                       f"loss.backward() between zero_grad() and step()")
            out.append(self.finding(message, where=info.site, step=0, evidence={
                "optimizer": info.cls, "optimizer_site": info.site, "steps": info.steps,
                "sampled_steps_without_gradient": sampled}))
        return out
