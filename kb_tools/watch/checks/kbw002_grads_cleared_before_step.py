"""KBW002: step() finds the gradients cleared although the backward() before it filled them.

Criterion: on at least 2 sampled steps, and on at least 80% of the sampled steps that had a
backward(), the backward() before an optimizer's step() left a non-zero gradient on its first
parameter that has one, and at step() the gradient norm of all its parameters was zero or none
had a gradient at all: zero_grad() runs between backward() and step() (or step() runs before
backward(), with zero_grad() in between), so no parameter moves. A second form counts the same
way: a backward() left that gradient non-zero and a later backward() before the same step() left
it exactly zero (a tensor of zeros, not cleared): two backward() calls whose gradients cancel, such
as -loss for one optimizer and +loss for another into the same .grad before either steps.
"""
from __future__ import annotations

import weakref

from kb_tools.watch.checks import Check, created_at, plural

MIN_HITS = 2
MIN_SHARE = 0.8


class _State:
    __slots__ = ("after", "seen", "hits", "first_step", "norm", "cancelled", "cancels")

    def __init__(self):
        self.after, self.seen, self.hits, self.first_step, self.norm = None, 0, 0, None, 0.0
        self.cancelled = False  # a later backward() left the probe's gradient exactly zero since this step began
        self.cancels = 0        # hits where that happened


class GradsClearedBeforeStep(Check):
    __doc__ = __doc__
    code = "KBW002"
    name = "grads-cleared-before-step"
    entry = "optimizer-step-order"
    title = "step() sees no gradient although backward() produced one: zero_grad() between them"
    confidence = 0.95

    def __init__(self, session):
        super().__init__(session)
        self.state: dict[int, _State] = {}
        self.probe: dict[int, weakref.ref] = {}  # per optimizer: the parameter looked at after backward()

    def on_after_backward(self, tensors):
        # one parameter per optimizer, not all: a backward() fills every gradient it reaches, and
        # a clearing between backward() and step() clears them all; the full norm is read at step()
        for opt in self.session.live_optimizers():
            ref = self.probe.get(id(opt))
            p = ref() if ref is not None else None
            if p is None or p.grad is None:
                p = next((q for q in self.session.params_of(opt) if q.grad is not None), None)
                if p is not None:
                    self.probe[id(opt)] = weakref.ref(p)
            norm = float(p.grad.detach().norm()) if p is not None and p.grad is not None else 0.0
            st = self.state.get(id(opt))
            if norm:
                st = st or self.state.setdefault(id(opt), _State())
                st.after, st.cancelled = norm, False
            elif st is not None:
                if st.after is not None and p is not None and p.grad is not None:
                    st.cancelled = True  # filled by an earlier backward(), exactly zero after this one
                else:
                    st.after = None  # this backward() left it nothing: an earlier one does not count

    def on_step_pre(self, optimizer):
        st = self.state.get(id(optimizer))
        if st is None or st.after is None:
            return
        st.seen += 1
        now = self.session.grad_norm(optimizer)
        if not now:
            st.hits += 1
            st.cancels += st.cancelled
            if st.first_step is None:
                st.first_step, st.norm = self.session.step, st.after
        st.after, st.cancelled = None, False

    def findings(self) -> list:
        out = []
        for key, st in self.state.items():
            if st.hits < MIN_HITS or st.hits < MIN_SHARE * st.seen:
                continue
            info = self.session.optimizers.get(key)
            site = info.site if info is not None else None
            if 2 * st.cancels >= st.hits:
                message = (f"on {st.hits} of {plural(st.seen, 'sampled step')} step() found every gradient exactly "
                           f"zero although a backward() before it had filled them and a later one emptied them again "
                           f"({created_at('optimizer', site)}): two backward() calls whose gradients cancel in the "
                           f"same .grad (a loss and its negation, for two optimizers) before the step, so no "
                           f"parameter moves; step (and zero_grad) after each backward() that is meant to update")
            else:
                message = (f"on {st.hits} of {plural(st.seen, 'sampled step')} step() found every gradient cleared "
                           f"although the backward() before it had filled them ({created_at('optimizer', site)}): "
                           f"zero_grad() runs between backward() and step(), so no parameter moves")
            evidence = {"steps_cleared": st.hits, "sampled_steps_with_backward": st.seen,
                        "first_step": st.first_step, "probe_grad_norm_after_backward": st.norm,
                        "grad_norm_at_step": 0.0, "optimizer": info.cls if info else None,
                        "steps_cancelled": st.cancels}
            out.append(self.finding(message, evidence=evidence, where=site, step=st.first_step))
        return out
