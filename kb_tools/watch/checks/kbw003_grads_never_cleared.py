"""KBW003: nothing clears the gradients, so every step applies the sum of all gradients so far.

Criterion: on at least 3 pairs of consecutive sampled steps, the first backward() after step()
started from exactly the gradient that step() had used (the same non-zero norm, to a relative
1e-6) and no later backward() before that optimizer's next step() found it cleared, and on no
such pair was the gradient cleared: zero_grad() is never called, and the gradient norm grows
with the step count (reported as the ratio of the last to the first norm). With two optimizers
(a GAN), the generator's backward() runs through the discriminator after the discriminator's
step(); the discriminator's zero_grad() before its own backward() then clears it: not carried.
"""
from __future__ import annotations

import math

from kb_tools.watch.checks import Check, created_at, plural

MIN_CARRIED = 3


class _State:
    __slots__ = ("at_step", "step_norm", "fresh", "pending", "compared", "carried", "cleared", "first_norm", "first_step",
                 "last_norm", "last_step")

    def __init__(self):
        self.at_step = self.step_norm = self.first_norm = self.first_step = self.last_norm = self.last_step = None
        self.fresh, self.compared, self.carried, self.cleared = False, 0, 0, 0
        self.pending = False  # a carried gradient not yet seen at this optimizer's next step()


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
        st.pending = False  # the carried gradient reached this step(): confirmed
        st.at_step, st.step_norm = self.session.step, norm
        if norm and math.isfinite(norm):
            if st.first_norm is None:
                st.first_norm, st.first_step = norm, self.session.step
            st.last_norm, st.last_step = norm, self.session.step

    def on_step_post(self, optimizer):
        st = self.state.get(id(optimizer))
        if st is not None:
            st.fresh = True

    def on_before_backward(self, tensors):
        step = self.session.step
        for key, st in self.state.items():
            if st.pending:
                opt = self.session.optimizers.get(key)
                opt = opt.optimizer if opt is not None else None
                if opt is not None and not self.session.grad_norm(opt):
                    st.pending = False  # cleared before its own next step(): another optimizer's backward
                    st.carried -= 1
                    st.cleared += 1
                continue
            if not st.fresh:
                continue
            st.fresh = False
            # step - 1: the primary optimizer (whose step() counts the steps); step: another one that
            # stepped after it in the same step (a GAN's generator after its discriminator)
            if st.at_step not in (step - 1, step) or not st.step_norm or not math.isfinite(st.step_norm):
                continue  # not consecutive steps, or nothing to compare with
            opt = self.session.optimizers.get(key)
            opt = opt.optimizer if opt is not None else None
            if opt is None:
                continue
            now = self.session.grad_norm(opt)
            st.compared += 1
            if not now:
                st.cleared += 1
            elif abs(now - st.step_norm) <= 1e-6 * st.step_norm:
                st.carried += 1
                st.pending = True

    def findings(self) -> list:
        out = []
        for key, st in self.state.items():
            if st.carried < MIN_CARRIED or st.cleared:
                continue
            info = self.session.optimizers.get(key)
            site = info.site if info is not None else None
            growth = st.last_norm / st.first_norm if st.first_norm else float("nan")
            message = (f"on {st.carried} of {plural(st.compared, 'pair')} of consecutive steps the first backward() "
                       f"added to the gradient the previous step() had used: nothing clears .grad "
                       f"({created_at('optimizer', site)}), so each step applies the sum of all gradients so far; "
                       f"the gradient norm at step() went from {st.first_norm:.3g} at step {st.first_step} to "
                       f"{st.last_norm:.3g} at step {st.last_step} ({growth:.1f}x)")
            evidence = {"steps_carried_over": st.carried, "pairs_compared": st.compared, "grad_norm_first": st.first_norm,
                        "grad_norm_first_step": st.first_step, "grad_norm_last": st.last_norm,
                        "grad_norm_last_step": st.last_step, "growth": growth,
                        "optimizer": info.cls if info else None}
            out.append(self.finding(message, evidence=evidence, where=site, step=st.first_step))
        return out
