"""KBW013: the learning rate decays to about zero long before the run ends.

Criterion: every param group's lr is at most 1/10,000 of the largest lr the optimizer had (and
that peak is above 0), and it stays there for the rest of the run, over at least 3 optimizer
steps and at least 10% of the steps watched (a step of the brief run after --steps, one batch of
an epoch, counts as that epoch's steps: Session.run_steps). The lr is read at every step (a float per param
group), so a decay too quick for the sampled steps is seen. A schedule that reaches zero only
at its very end (cosine to 0) spends well under 1% of the run that low and is not reported. A
learning rate below 0 counts as that low (the message then says the steps climb; KBW091 measures it).

Second form, read from the scheduler itself: a StepLR, MultiStepLR or ExponentialLR built with
gamma=0 sets the lr to exactly 0 at its first milestone, for good, however far off that is.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, created_at, plural

DECAY = 1e-4
MIN_SAMPLES = 3  # optimizer steps spent that low
GAMMA_SCHEDULERS = ("StepLR", "MultiStepLR", "ExponentialLR")
MIN_SHARE = 0.1


def _lrs(opt) -> list:
    out = []
    for g in opt.param_groups:
        lr = g.get("lr", 0.0)
        out.append(float(lr.item() if hasattr(lr, "item") else lr))
    return out


def _brief_share(low: int, total: int) -> str:
    return f", {low / total:.0%} of the run when each epoch run in brief counts as the steps it stands for"


class _State:
    __slots__ = ("peak", "peak_step", "low_since", "low_since_run", "low_samples", "low_lr", "last_lr", "last_step")

    def __init__(self):
        self.peak, self.peak_step, self.low_since, self.low_samples = 0.0, None, None, 0
        self.low_since_run = 0   # Session.run_steps when the lr went that low
        self.low_lr = self.last_lr = self.last_step = None


class LrDecayedToZero(Check):
    __doc__ = __doc__
    code = "KBW013"
    name = "lr-decayed-to-zero"
    entry = "lr-decay-too-early"
    title = ("learning rate down to 1/10,000 of its peak and staying there for the rest of the run, or a "
             "step scheduler built with gamma=0")
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.state: dict[int, _State] = {}
        self.gamma_zero: dict[int, tuple] = {}  # id(SchedulerInfo) -> (info, step_size, milestones), read while alive

    def on_step_pre(self, optimizer):
        for sched in self.session.schedulers_of(id(optimizer)):
            obj = sched.ref()
            if (id(sched) not in self.gamma_zero and obj is not None and sched.cls in GAMMA_SCHEDULERS
                    and getattr(obj, "gamma", None) == 0):
                milestones = sorted(getattr(obj, "milestones", ()) or ()) or None
                self.gamma_zero[id(sched)] = (sched, getattr(obj, "step_size", None), milestones)

    def on_any_step_pre(self, optimizer):
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
                st.low_since_run = self.session.run_steps
            st.low_samples += 1
            st.last_lr, st.last_step = now, self.session.step
        else:
            st.low_since, st.low_samples = None, 0

    def findings(self) -> list:
        s = self.session
        out = []
        zeroed = set()
        for sched, step_size, milestones in self.gamma_zero.values():
            out.append(self._gamma_zero(sched, step_size, milestones))
            zeroed.add(sched.optimizer_id)
        for key, st in self.state.items():
            if key in zeroed:
                continue
            if st.low_since is None or st.low_samples < MIN_SAMPLES:
                continue
            low_steps = s.step - st.low_since
            low_run = s.run_steps - st.low_since_run
            if low_run < MIN_SHARE * s.run_steps:
                continue
            info = s.optimizers.get(key)
            schedulers = s.schedulers_of(key)
            ticks = "".join(f"; {sch.cls} ({created_at('scheduler', sch.site)}) stepped {plural(sch.steps(), 'time')} "
                            f"in {plural(info.steps, 'optimizer step')}" for sch in schedulers[:2])
            effect = ("it went below 0, so from then on every step moves the weights up the gradient"
                      if min(st.low_lr, st.last_lr if st.last_lr is not None else 0.0) < 0 else
                      "from then on no step moves the weights")
            later = f", {st.last_lr:.3g} at step {st.last_step}" if st.last_step != st.low_since else ""
            message = (f"the learning rate fell from {st.peak:.3g} at step {st.peak_step} to {st.low_lr:.3g} by step "
                       f"{st.low_since}{later}, and stayed that low for {low_steps} of the {plural(s.step, 'step')} watched"
                       f"{_brief_share(low_run, s.run_steps) if s.run_steps != s.step else ''} "
                       f"({created_at('optimizer', info.site if info else None)}){ticks}: {effect}")
            out.append(self.finding(message, where=schedulers[0].site if schedulers else (info.site if info else None),
                                    step=st.low_since, evidence={
                                        "peak_lr": st.peak, "peak_step": st.peak_step, "lr": st.low_lr, "last_lr": st.last_lr,
                                        "low_from_step": st.low_since, "steps_low": low_steps,
                                        "schedulers": [s_.to_dict() for s_ in schedulers]}))
        return out

    def _gamma_zero(self, sched, step_size, milestones):
        """gamma=0 is never a decay, only an lr of 0 from the first milestone on."""
        if sched.cls == "StepLR":
            when = f"after {plural(step_size, 'scheduler step')}"
        elif sched.cls == "MultiStepLR":
            when = f"at its first milestone ({milestones[0]} scheduler steps)" if milestones else "at its first milestone"
        else:
            when = "after its first step"
        info = self.session.optimizers.get(sched.optimizer_id)
        message = (f"{sched.cls} ({created_at('scheduler', sched.site)}) has gamma=0: {when} it multiplies the "
                   f"learning rate by 0, and from then on every step leaves the weights as they are "
                   f"({created_at('optimizer', info.site if info else None)}; stepped "
                   f"{plural(sched.steps(), 'time')} so far); a schedule meant to be off is gamma=1")
        return self.finding(message, where=sched.site, step=0, evidence={
            "scheduler": sched.to_dict(), "gamma": 0, "step_size": step_size, "milestones": milestones})
