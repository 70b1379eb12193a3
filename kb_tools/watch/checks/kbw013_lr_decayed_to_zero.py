"""KBW013: the learning rate decays to about zero long before the run ends.

Criterion: at a sampled step every param group's lr is at most 1/10,000 of the largest lr the
optimizer had (and that peak is above 0), and it stays there for the rest of the run, over at
least 3 sampled steps and at least 10% of the steps watched. A schedule that reaches zero only
at its very end (cosine to 0) spends well under 1% of the run that low and is not reported.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, created_at, plural

DECAY = 1e-4
MIN_SAMPLES = 3
MIN_SHARE = 0.1


def _lrs(opt) -> list:
    out = []
    for g in opt.param_groups:
        lr = g.get("lr", 0.0)
        out.append(float(lr.item() if hasattr(lr, "item") else lr))
    return out


class _State:
    __slots__ = ("peak", "peak_step", "low_since", "low_samples", "low_lr", "last_lr", "last_step")

    def __init__(self):
        self.peak, self.peak_step, self.low_since, self.low_samples = 0.0, None, None, 0
        self.low_lr = self.last_lr = self.last_step = None


class LrDecayedToZero(Check):
    __doc__ = __doc__
    code = "KBW013"
    name = "lr-decayed-to-zero"
    entry = "lr-decay-too-early"
    title = "learning rate down to 1/10,000 of its peak and staying there for the rest of the run"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.state: dict[int, _State] = {}

    def on_step_pre(self, optimizer):
        lrs = _lrs(optimizer)
        if not lrs:
            return
        st = self.state.setdefault(id(optimizer), _State())
        now = max(lrs)
        if now > st.peak:
            st.peak, st.peak_step = now, self.session.step
        if st.peak > 0 and now <= st.peak * DECAY:
            if st.low_since is None:
                st.low_since, st.low_samples, st.low_lr = self.session.step, 0, now
            st.low_samples += 1
            st.last_lr, st.last_step = now, self.session.step
        else:
            st.low_since, st.low_samples = None, 0

    def findings(self) -> list:
        s = self.session
        out = []
        for key, st in self.state.items():
            if st.low_since is None or st.low_samples < MIN_SAMPLES:
                continue
            low_steps = s.step - st.low_since
            if low_steps < MIN_SHARE * s.step:
                continue
            info = s.optimizers.get(key)
            schedulers = s.schedulers_of(key)
            ticks = "".join(f"; {sch.cls} ({created_at('scheduler', sch.site)}) stepped {plural(sch.steps(), 'time')} "
                            f"in {plural(info.steps, 'optimizer step')}" for sch in schedulers[:2])
            later = f", {st.last_lr:.3g} at step {st.last_step}" if st.last_step != st.low_since else ""
            message = (f"the learning rate fell from {st.peak:.3g} at step {st.peak_step} to {st.low_lr:.3g} by step "
                       f"{st.low_since}{later}, and stayed that low for {low_steps} of the {plural(s.step, 'step')} watched "
                       f"({created_at('optimizer', info.site if info else None)}){ticks}: from then on no step "
                       f"moves the weights")
            out.append(self.finding(message, where=schedulers[0].site if schedulers else (info.site if info else None),
                                    step=st.low_since, evidence={
                                        "peak_lr": st.peak, "peak_step": st.peak_step, "lr": st.low_lr, "last_lr": st.last_lr,
                                        "low_from_step": st.low_since, "steps_low": low_steps,
                                        "schedulers": [s_.to_dict() for s_ in schedulers]}))
        return out
