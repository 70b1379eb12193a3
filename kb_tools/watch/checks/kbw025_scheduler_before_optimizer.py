"""KBW025: the learning-rate scheduler ticked before the optimizer's first step().

Criterion: when an optimizer's first step() runs, a scheduler created over it (not
ReduceLROnPlateau, which is driven by a metric) has already ticked at least 1 time since it was
created (and at most 2 times), so the first value of the schedule was never used. Not
reported when the optimizer already holds state or the scheduler ticked more than 2 times (both
restored from a checkpoint: a resumed run), nor when a GradScaler's
scale is already below its initial value at that moment: AMP skipped the first step(s) on an
overflow, which ticks the scheduler first in a correctly ordered loop too.
"""
from __future__ import annotations

import weakref

from kb_tools.watch.checks import Check, created_at, plural

_METRIC_DRIVEN = ("ReduceLROnPlateau",)
MAX_TICKS = 2  # more ticks before the first step() is a scheduler restored by load_state_dict


def _first_lr(opt) -> float | None:
    if not opt.param_groups:
        return None
    lr = opt.param_groups[0].get("lr")
    return float(lr.item() if hasattr(lr, "item") else lr) if lr is not None else None


class SchedulerBeforeOptimizer(Check):
    __doc__ = __doc__
    code = "KBW025"
    name = "scheduler-before-optimizer"
    entry = "scheduler-step-order"
    title = "scheduler.step() ran before the optimizer's first step(): the first value of the schedule is skipped"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        # the optimizers whose first step was looked at; weak, for a dropped one's id can come back as a new one's
        self.seen: weakref.WeakSet = weakref.WeakSet()
        self.found: dict | None = None  # the first case: plain numbers and names only

    def _scaler_skipped(self) -> bool:
        for scaler in self.session.live_scalers():
            try:
                if scaler.is_enabled() and getattr(scaler, "_scale", None) is not None \
                        and scaler.get_scale() < scaler._init_scale:
                    return True
            except (AttributeError, RuntimeError, TypeError):
                continue
        return False

    def on_step_pre(self, optimizer):
        if self.found is not None or optimizer in self.seen or len(self.seen) >= 64:
            return
        s = self.session
        info = s.optimizer_info(optimizer)
        if info is None or info.steps > 0:  # not its first step (an optimizer known only now)
            self.seen.add(optimizer)
            return
        self.seen.add(optimizer)
        ahead = [(sch, sch.steps()) for sch in s.schedulers_of(id(optimizer))
                 if sch.ref() is not None and sch.ref().optimizer is optimizer and sch.cls not in _METRIC_DRIVEN]
        ahead = [(sch, n) for sch, n in ahead if 1 <= n <= MAX_TICKS]
        if not ahead or optimizer.state or self._scaler_skipped():
            return
        sch, ticks = ahead[0]
        self.found = {"scheduler": sch.cls, "scheduler_site": sch.site, "ticks": ticks, "optimizer": info.cls,
                      "optimizer_site": info.site, "initial_lr": info.initial_lrs[0] if info.initial_lrs else None,
                      "lr_at_first_step": _first_lr(optimizer), "step": s.step}

    def findings(self) -> list:
        f = self.found
        if f is None:
            return []
        lrs = f" (that step used lr {f['lr_at_first_step']:.3g})" if f["lr_at_first_step"] is not None else ""
        message = (f"{f['scheduler']} ({created_at('scheduler', f['scheduler_site'])}) had ticked "
                   f"{plural(f['ticks'], 'time')} before the first step() of {f['optimizer']} "
                   f"({created_at('optimizer', f['optimizer_site'])}) at step {f['step']}{lrs}: scheduler.step() runs "
                   f"before optimizer.step(), so the first value of the schedule is never used and every step "
                   f"uses the next one")
        return [self.finding(message, where=f["scheduler_site"], step=f["step"], evidence=dict(f))]
