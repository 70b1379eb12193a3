"""KBW039: a scheduler stepped more often than its optimizer, so the schedule runs ahead of training.

Criterion: after at least 10 steps of an optimizer, a scheduler attached to it has been stepped
at least twice as many times and at least 10 times more (its own step() count against the
optimizer's): scheduler.step() sits in the per-batch loop while the optimizer steps once per
accumulation window (or is skipped), so warmup and decay happen several times too fast. A scaler
that skips a few steps on overflow moves the counts by a few, not by a factor of 2.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, created_at

MIN_STEPS = 10
RATIO = 2.0
MIN_GAP = 10


class SchedulerOutpacesOptimizer(Check):
    __doc__ = __doc__
    code = "KBW039"
    name = "scheduler-outpaces-optimizer"
    entry = "scheduler-step-order"
    title = "scheduler.step() called at least twice as often as optimizer.step(): the schedule runs ahead"
    confidence = 0.88  # above KBW033's: a schedule ahead of its optimizer explains a cosine past T_max too

    def __init__(self, session):
        super().__init__(session)
        self.seen: dict[int, tuple] = {}  # id(scheduler info) -> (scheduler steps, optimizer steps, step, info)

    def on_step_pre(self, optimizer):
        s = self.session
        info = s.optimizer_info(optimizer)
        if info is None or info.steps < MIN_STEPS:
            return
        for sched in s.schedulers_of(id(optimizer)):
            ticks = sched.steps()
            if ticks >= RATIO * info.steps and ticks - info.steps >= MIN_GAP:
                self.seen[id(sched)] = (ticks, info.steps, s.step, sched, info)

    def findings(self) -> list:
        out = []
        for ticks, steps, at, sched, info in self.seen.values():
            message = (f"{sched.cls} ({created_at('scheduler', sched.site)}) was stepped {ticks} times in "
                       f"{steps} steps of its optimizer ({info.cls}, {created_at('optimizer', info.site)}), "
                       f"{ticks / steps:.1f} times per update: scheduler.step() runs per batch while the optimizer "
                       f"steps once per accumulation window, so the schedule runs that much too fast; step the "
                       f"scheduler right after optimizer.step()")
            out.append(self.finding(message, where=sched.site, step=at, evidence={
                "scheduler_steps": ticks, "optimizer_steps": steps, "ratio": round(ticks / steps, 2),
                "scheduler": sched.cls, "optimizer": info.cls}))
        return out
