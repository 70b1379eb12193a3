"""KBW083: a schedule counted in optimizer steps (OneCycleLR, CyclicLR) stepped once per epoch
(scheduler-step-order).

Criterion: a OneCycleLR, or a CyclicLR, whose period in scheduler steps (OneCycleLR's
total_steps; CyclicLR's step_size_up) is at least the number of optimizer steps the run took
while the scheduler existed, and which, after at least 20 such optimizer steps, was stepped at
most once per 10 of them. These schedules are written for one step() per batch: stepped once per
epoch they advance a few of their planned steps over the whole run, so the learning rate never
leaves its starting value, max_lr / div_factor for OneCycleLR. A OneCycleLR planned in epochs
(total_steps = epochs) has a period shorter than the steps taken and is left alone.
"""
from __future__ import annotations

from torch.optim import lr_scheduler

from kb_tools.watch.checks import Check, created_at, plural

MIN_UPDATES = 20
RATIO = 10


def _period(scheduler) -> int | None:
    """The schedule's length in its own steps: OneCycleLR's total_steps, CyclicLR's step_size_up."""
    if isinstance(scheduler, lr_scheduler.OneCycleLR):
        return getattr(scheduler, "total_steps", None)
    if isinstance(scheduler, lr_scheduler.CyclicLR):
        size = getattr(scheduler, "total_size", None)
        ratio = getattr(scheduler, "step_ratio", None)
        return int(size * ratio) if size is not None and ratio is not None else None
    return None


class PerBatchScheduleSteppedPerEpoch(Check):
    __doc__ = __doc__
    code = "KBW083"
    name = "per-batch-schedule-stepped-per-epoch"
    entry = "scheduler-step-order"
    title = "a OneCycleLR or CyclicLR stepped at most once per 10 optimizer steps: its schedule barely moves"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.start: dict = {}     # id(scheduler info) -> (optimizer steps when first seen, period)
        self.seen: dict = {}      # id(scheduler info) -> (scheduler steps, optimizer steps, period, its info,
        #                           the optimizer's info, session step)

    def on_any_step_pre(self, optimizer):
        self._measure(optimizer)

    def on_end(self):
        for info in self.session.optimizers.values():
            opt = info.optimizer
            if opt is not None:
                self._measure(opt)

    def _measure(self, optimizer):
        s = self.session
        info = s.optimizer_info(optimizer)
        if info is None:
            return
        for sched in s.schedulers_of(id(optimizer)):
            key = id(sched)
            if key not in self.start:
                scheduler = sched.ref()
                period = _period(scheduler) if scheduler is not None else None
                self.start[key] = (info.steps, period)
            began, period = self.start[key]
            if period is None:
                continue
            updates, ticks = info.steps - began, sched.steps()
            if updates >= MIN_UPDATES and period >= updates and ticks * RATIO <= updates:
                self.seen[key] = (ticks, updates, period, sched, info, s.step)

    def findings(self) -> list:
        out = []
        for ticks, updates, period, sched, info, step in self.seen.values():
            out.append(self.finding(
                f"{sched.cls} ({created_at('scheduler', sched.site)}) was stepped {plural(ticks, 'time')} in {updates} steps "
                f"of its optimizer ({info.cls}, {created_at('optimizer', info.site)}) although its schedule spans "
                f"{period} steps: it is a per-batch schedule stepped once per epoch (or less), so the learning rate "
                f"stays near its starting value for the whole run; call scheduler.step() after every "
                f"optimizer.step()",
                where=sched.site, step=step, evidence={"scheduler_steps": ticks, "optimizer_steps": updates,
                                            "period": period, "scheduler": sched.cls}))
        return out
