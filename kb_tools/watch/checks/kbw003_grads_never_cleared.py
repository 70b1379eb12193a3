"""KBW003: nothing clears the gradients, so every step applies the sum of all gradients so far.

Criterion: on at least 3 pairs of consecutive sampled steps, the first backward() after step()
that reached the optimizer's parameters (a backward() that leaves their gradient unchanged, such
as a GAN's discriminator pass over a detached sample, is passed over) started from exactly the
gradient that step() had used or left behind (the same non-zero norm, to a relative 1e-6; an
optimizer that clips each gradient inside step() leaves another one than it found), and on no
such pair was the gradient cleared (no backward() between the two steps started from a cleared
gradient): zero_grad() is never called, and the gradient norm grows with the step count
(reported as the ratio of the last to the first norm).
"""
from __future__ import annotations

import math

from kb_tools.watch.checks import Check, created_at, plural

MIN_CARRIED = 3


class _State:
    __slots__ = ("at_step", "step_norm", "post_norm", "fresh", "compared", "carried", "cleared", "first_norm",
                 "first_step", "last_norm", "last_step", "before", "interval_cleared", "interval_carried")

    def __init__(self):
        self.at_step = self.step_norm = self.post_norm = None
        self.first_norm = self.first_step = self.last_norm = self.last_step = None
        self.fresh, self.compared, self.carried, self.cleared = False, 0, 0, 0
        self.before = self.interval_carried = None
        self.interval_cleared = False


class GradsNeverCleared(Check):
    __doc__ = __doc__
    code = "KBW003"
    name = "grads-never-cleared"
    entry = "optimizer-step-order"
    title = "the first backward() after step() adds to the gradient step() used: zero_grad() is never called"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.state: dict[int, _State] = {}

    def on_step_pre(self, optimizer):
        norm = self.session.grad_norm(optimizer)
        st = self.state.setdefault(id(optimizer), _State())
        if st.fresh and st.at_step == self.session.step - 1 and st.step_norm and math.isfinite(st.step_norm):
            # judge the interval since the previous step: cleared if any backward() in it started from
            # no gradient, carried if the first backward() that reached the parameters started from
            # the gradient the previous step() had used
            if st.interval_cleared:
                st.compared += 1
                st.cleared += 1
            elif st.interval_carried is not None:
                st.compared += 1
                st.carried += st.interval_carried
        st.fresh, st.before = False, None
        st.at_step, st.step_norm = self.session.step, norm
        if norm and math.isfinite(norm):
            if st.first_norm is None:
                st.first_norm, st.first_step = norm, self.session.step
            st.last_norm, st.last_step = norm, self.session.step

    def on_step_post(self, optimizer):
        st = self.state.get(id(optimizer))
        if st is not None:
            st.fresh, st.interval_cleared, st.interval_carried, st.before = True, False, None, None
            st.post_norm = self.session.grad_norm(optimizer)

    def _open(self):
        """(state, optimizer) of every optimizer whose interval since its last step() is watched."""
        step = self.session.step
        for key, st in self.state.items():
            if not st.fresh or st.at_step not in (step, step - 1):
                continue
            info = self.session.optimizers.get(key)
            opt = info.optimizer if info is not None else None
            if opt is not None:
                yield st, opt

    def on_before_backward(self, tensors):
        for st, opt in self._open():
            now = self.session.grad_norm(opt)
            if not now:
                st.interval_cleared = True
            elif st.interval_carried is None:
                st.before = now

    def on_after_backward(self, tensors):
        for st, opt in self._open():
            if st.before is None:
                continue
            before, st.before = st.before, None
            if self.session.grad_norm(opt) == before:
                continue  # this backward() did not reach the parameters (a GAN's other network)
            st.interval_carried = any(norm and abs(before - norm) <= 1e-6 * norm
                                      for norm in (st.step_norm, st.post_norm))

    def findings(self) -> list:
        out = []
        for key, st in self.state.items():
            if st.carried < MIN_CARRIED or st.cleared:
                continue
            info = self.session.optimizers.get(key)
            site = info.site if info is not None else None
            growth = st.last_norm / st.first_norm if st.first_norm else float("nan")
            message = (f"on {st.carried} of {plural(st.compared, 'pair')} of consecutive steps the first backward() "
                       f"added to the gradient the previous step() had used or left: nothing clears .grad "
                       f"({created_at('optimizer', site)}), so each step applies the sum of all gradients so far; "
                       f"the gradient norm at step() went from {st.first_norm:.3g} at step {st.first_step} to "
                       f"{st.last_norm:.3g} at step {st.last_step} ({growth:.1f}x)")
            evidence = {"steps_carried_over": st.carried, "pairs_compared": st.compared, "grad_norm_first": st.first_norm,
                        "grad_norm_first_step": st.first_step, "grad_norm_last": st.last_norm,
                        "grad_norm_last_step": st.last_step, "growth": growth,
                        "optimizer": info.cls if info else None}
            out.append(self.finding(message, evidence=evidence, where=site, step=st.first_step))
        return out
