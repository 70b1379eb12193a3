"""KBW033: a cosine schedule stepped past its period, so the learning rate hit its floor and climbs again.

Criterion: a CosineAnnealingLR (not the warm-restart kind) has been stepped more than T_max + 1
times while its optimizer keeps stepping: the rate reached eta_min at T_max steps and is rising
back towards its start. The usual cause is T_max counted in epochs while scheduler.step() runs
once per batch. Exact: the scheduler's own last_epoch and T_max are read, nothing is estimated.
"""
from __future__ import annotations

from torch.optim.lr_scheduler import CosineAnnealingLR

from kb_tools.watch.checks import Check, created_at, plural


class CosinePastItsPeriod(Check):
    __doc__ = __doc__
    code = "KBW033"
    name = "cosine-past-its-period"
    entry = "lr-decay-too-early"
    title = "a CosineAnnealingLR stepped past T_max: the learning rate bottomed out and climbs again"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.found: dict[int, dict] = {}  # scheduler id -> what was seen

    def on_step_pre(self, optimizer):
        s = self.session
        for info in s.schedulers_of(id(optimizer)):
            sched = info.ref()
            if not isinstance(sched, CosineAnnealingLR) or id(sched) in self.found:
                continue
            t_max, ticks = getattr(sched, "T_max", None), getattr(sched, "last_epoch", 0)
            if not isinstance(t_max, int) or t_max <= 0 or ticks <= t_max + 1:
                continue
            lrs = [float(g["lr"]) for g in optimizer.param_groups]
            self.found[id(sched)] = {"scheduler": info.cls, "site": info.site, "T_max": t_max, "stepped": ticks,
                                     "optimizer_steps": s.step, "lr": lrs[0] if lrs else None,
                                     "eta_min": float(getattr(sched, "eta_min", 0.0)),
                                     "base_lr": float(sched.base_lrs[0]) if sched.base_lrs else None}

    def findings(self) -> list:
        out = []
        for seen in self.found.values():
            per = " (about once per optimizer step: T_max looks counted in epochs)" \
                if seen["stepped"] >= seen["optimizer_steps"] - 1 else ""
            message = (f"{seen['scheduler']} with T_max={seen['T_max']} was stepped "
                       f"{plural(seen['stepped'], 'time')} by optimizer step {seen['optimizer_steps']}{per}: the "
                       f"learning rate reached eta_min={seen['eta_min']:.3g} after {seen['T_max']} and is climbing "
                       f"back ({seen['lr']:.3g} now, base {seen['base_lr']:.3g}) "
                       f"({created_at('scheduler', seen['site'])})")
            out.append(self.finding(message, evidence=seen, where=seen["site"], step=seen["optimizer_steps"]))
        return out
