"""KBW002: step() finds the gradients cleared although the backward() before it filled them.

Criterion: on at least 2 sampled steps, and on at least 80% of the sampled steps that had a
backward(), the backward() before an optimizer's step() left a non-zero gradient on its first
parameter that has one, and at step() the gradient norm of all its parameters was zero or none
had a gradient at all: zero_grad() runs between backward() and step() (or step() runs before
backward(), with zero_grad() in between), so no parameter moves.
"""
from __future__ import annotations

import weakref

from kb_tools.watch.checks import Check, created_at, plural

MIN_HITS = 2
MIN_SHARE = 0.8


class _State:
    __slots__ = ("after", "seen", "hits", "first_step", "norm")

    def __init__(self):
        self.after, self.seen, self.hits, self.first_step, self.norm = None, 0, 0, None, 0.0


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
            if norm:
                self.state.setdefault(id(opt), _State()).after = norm
            elif id(opt) in self.state:
                self.state[id(opt)].after = None  # this backward() left it nothing: an earlier one does not count

    def on_step_pre(self, optimizer):
        st = self.state.get(id(optimizer))
        if st is None or st.after is None:
            return
        st.seen += 1
        now = self.session.grad_norm(optimizer)
        if not now:
            st.hits += 1
            if st.first_step is None:
                st.first_step, st.norm = self.session.step, st.after
        st.after = None

    def findings(self) -> list:
        out = []
        for key, st in self.state.items():
            if st.hits < MIN_HITS or st.hits < MIN_SHARE * st.seen:
                continue
            info = self.session.optimizers.get(key)
            site = info.site if info is not None else None
            message = (f"on {st.hits} of {plural(st.seen, 'sampled step')} step() found every gradient cleared "
                       f"although the backward() before it had filled them ({created_at('optimizer', site)}): "
                       f"zero_grad() runs between backward() and step(), so no parameter moves")
            evidence = {"steps_cleared": st.hits, "sampled_steps_with_backward": st.seen,
                        "first_step": st.first_step, "probe_grad_norm_after_backward": st.norm,
                        "grad_norm_at_step": 0.0, "optimizer": info.cls if info else None}
            out.append(self.finding(message, evidence=evidence, where=site, step=st.first_step))
        return out
