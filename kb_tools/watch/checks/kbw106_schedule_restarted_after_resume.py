"""KBW106: a scheduler created after the optimizer's state was loaded moves the restored learning
rate back to the start of its schedule (lr-not-restored-after-load).

Criterion: Optimizer.load_state_dict restored per-parameter state (momentum buffers, Adam moments:
the checkpoint of an optimizer that had stepped) and param groups that carry `initial_lr` (the run
that saved it had a scheduler). Before the optimizer's next step, a scheduler was created on it
from the start of its schedule (its last_epoch was -1: LambdaLR, OneCycleLR, LinearLR and the
warmup schedules built on LambdaLR set the lr from `initial_lr` at once), and every group's
`initial_lr` is still the loaded one (a new base set by hand after loading, the documented way to
change the lr of a resumed run, is deliberate). Reported when, on each of the first MIN_STEPS
optimizer steps after the load, at least half of the groups run at an lr at least FACTOR times
above or below the lr the load restored: the schedule restarted instead of resuming. A scheduler
whose own state is loaded straight after, and stepped before the optimizer, puts the lr back within
those steps and is not reported; a schedule that stays where the load left it is not reported.
Checked on every step while a load is pending (a few floats per param group); nothing else.
"""
from __future__ import annotations

import weakref

from kb_tools.watch.checks import Check, created_at, plural
from kb_tools.watch.checks.kbw013_lr_decayed_to_zero import _lrs

FACTOR = 2.0
MIN_STEPS = 3
MAX_PENDING = 8


class _Load:
    __slots__ = ("ref", "restored", "initial", "schedulers", "site", "step", "wrong", "ratio", "first", "scheduler")

    def __init__(self, opt, site, step, schedulers):
        self.ref = weakref.ref(opt)
        self.restored = _lrs(opt)
        self.initial = [g.get("initial_lr") for g in opt.param_groups]
        self.schedulers = schedulers   # ids of the schedulers on this optimizer when it was loaded
        self.site, self.step = site, step
        self.wrong = 0                 # optimizer steps since the load run at the moved lr
        self.ratio = None              # lr now / lr restored, of the first group that moved, at the first step
        self.first = None              # the groups' lrs at the first step after the load
        self.scheduler = None          # the SchedulerInfo of the scheduler created after the load


def _moved(now: list, restored: list) -> float | None:
    """now / restored of the first moved group, when at least half of the groups moved FACTOR-fold
    (an lr set to 0, a warmup's first step, moved down all the way: ratio 0)."""
    ratios = [a / b for a, b in zip(now, restored) if a >= 0 and b > 0]
    moved = [r for r in ratios if r >= FACTOR or r <= 1 / FACTOR]
    return moved[0] if ratios and 2 * len(moved) >= len(ratios) else None


class ScheduleRestartedAfterResume(Check):
    __doc__ = __doc__
    code = "KBW106"
    name = "schedule-restarted-after-resume"
    entry = "lr-not-restored-after-load"
    title = "a scheduler created after the optimizer's state was loaded restarts the schedule from its first lr"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.pending: dict[int, _Load] = {}
        self.found: list = []   # the loads whose schedule restarted (_Load)

    def on_optimizer_state_loaded(self, optimizer, site):
        if not optimizer.state or not any(g.get("initial_lr") is not None for g in optimizer.param_groups):
            self.pending.pop(id(optimizer), None)
            return
        if len(self.pending) >= MAX_PENDING and id(optimizer) not in self.pending:
            return
        ids = {id(info.ref()) for info in self.session.schedulers
               if info.optimizer_id == id(optimizer) and info.ref() is not None}
        self.pending[id(optimizer)] = _Load(optimizer, site, self.session.step, ids)

    def on_any_step_pre(self, optimizer):
        if not self.pending:
            return
        load = self.pending.get(id(optimizer))
        if load is None or load.ref() is not optimizer:
            return
        if load.scheduler is None:   # the first step after the load: was a fresh scheduler created since?
            fresh = [info for info in self.session.schedulers
                     if info.optimizer_id == id(optimizer) and info.ref() is not None
                     and id(info.ref()) not in load.schedulers and info.from_start]
            initial = [g.get("initial_lr") for g in optimizer.param_groups]
            if not fresh or initial != load.initial:
                del self.pending[id(optimizer)]
                return
            load.scheduler = fresh[-1]
        now = _lrs(optimizer)
        ratio = _moved(now, load.restored)
        if ratio is None:
            del self.pending[id(optimizer)]   # back where the load left it (or never moved)
            return
        load.wrong += 1
        if load.ratio is None:
            load.ratio, load.first = ratio, now
        if load.wrong >= MIN_STEPS:
            del self.pending[id(optimizer)]
            if len(self.found) < MAX_PENDING:
                self.found.append(load)

    def findings(self) -> list:
        out = []
        for load in self.found:
            sched = load.scheduler
            restored, first = load.restored[0], load.first[0]
            if load.ratio >= 1:
                moved = f"up {load.ratio:.3g}x"
            else:
                moved = f"down {1 / load.ratio:.3g}x" if load.ratio > 0 else "down to 0"
            message = (f"the optimizer's state was loaded at {load.site or 'an unknown line'} (step {load.step}), "
                       f"restoring lr {restored:.3g}, and {sched.cls} ({created_at('scheduler', sched.site)}), "
                       f"created after that load from the start of its schedule, moved it {moved} "
                       f"(lr {first:.3g} at the first step after the load, and at least {FACTOR:g}x off on each "
                       f"of the first {plural(MIN_STEPS, 'optimizer step')}): "
                       f"the resumed run restarted its schedule; create the scheduler before "
                       f"optimizer.load_state_dict() and load the scheduler's state too")
            out.append(self.finding(message, where=sched.site or load.site, step=load.step, evidence={
                "loaded_at": load.site, "scheduler": sched.cls, "scheduler_site": sched.site,
                "lr_restored": load.restored[:8], "lr_after": load.first[:8], "factor": round(load.ratio, 4)}))
        return out
