"""KBW026: the optimizer is built anew during the run, so its state (momentum, Adam's moments) is lost.

Criterion: at least 2 times, a new optimizer of the same class over exactly the same set of
parameters stepped after the previous one had stepped and held state (a momentum buffer, Adam's
exp_avg/exp_avg_sq): the optimizer is constructed inside the epoch (or step) loop, and each one
starts again from empty moments. A single switch (a second training phase with a new optimizer)
is not reported; nor is plain SGD, which keeps no state to lose.
"""
from __future__ import annotations

import weakref

from kb_tools.watch.checks import Check, created_at, plural

MIN_REBUILDS = 2
MAX_KEPT = 64  # parameter sets and optimizers remembered at once


class _Rec:
    __slots__ = ("ref", "cls", "had_state", "steps", "rebuilds", "first_step", "site", "params", "previous_steps")

    def __init__(self, opt, site, params):
        self.ref, self.cls, self.site, self.params = weakref.ref(opt), type(opt).__name__, site, params
        self.had_state, self.steps, self.rebuilds, self.first_step, self.previous_steps = False, 0, 0, None, None


class OptimizerRebuilt(Check):
    __doc__ = __doc__
    code = "KBW026"
    name = "optimizer-rebuilt"
    entry = "optimizer-recreated-each-epoch"
    title = "a new optimizer over the same parameters again and again: its momentum/Adam state is dropped each time"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.keys: dict[int, tuple] = {}   # id(optimizer) -> (weakref, key of its parameter set)
        self.latest: dict[int, _Rec] = {}  # key of a parameter set -> the latest optimizer over it

    def _key(self, opt) -> tuple[int, int]:
        cached = self.keys.get(id(opt))
        if cached is not None and cached[0]() is opt:
            return cached[1]
        ids = frozenset(id(p) for p in self.session.params_of(opt))
        key = (hash(ids), len(ids))
        if len(self.keys) >= MAX_KEPT:
            self.keys = {k: v for k, v in self.keys.items() if v[0]() is not None}
        if len(self.keys) < MAX_KEPT:
            self.keys[id(opt)] = (weakref.ref(opt), key)
        return key

    def on_step_post(self, optimizer):
        key = self._key(optimizer)
        if not key[1]:
            return
        rec = self.latest.get(key[0])
        if rec is None:
            if len(self.latest) >= MAX_KEPT:
                self.latest = {k: r for k, r in self.latest.items() if r.rebuilds or r.ref() is not None}
                if len(self.latest) >= MAX_KEPT:
                    return
            info = self.session.optimizer_info(optimizer)
            rec = self.latest[key[0]] = _Rec(optimizer, info.site if info else None, key[1])
        elif rec.ref() is not optimizer:
            if rec.had_state and rec.cls == type(optimizer).__name__:
                rec.rebuilds += 1
                if rec.first_step is None:
                    rec.first_step, rec.previous_steps = self.session.step, rec.steps
            info = self.session.optimizer_info(optimizer)
            rec.ref, rec.cls, rec.had_state, rec.steps = weakref.ref(optimizer), type(optimizer).__name__, False, 0
            rec.site = info.site if info is not None else rec.site
        rec.steps += 1
        if not rec.had_state:
            rec.had_state = bool(optimizer.state)

    def findings(self) -> list:
        out = []
        for rec in self.latest.values():
            if rec.rebuilds < MIN_REBUILDS:
                continue
            message = (f"{rec.cls} ({created_at('optimizer', rec.site)}) was built anew over the same "
                       f"{plural(rec.params, 'parameter')} {plural(rec.rebuilds, 'time')} while training, first at step "
                       f"{rec.first_step} after the previous one had taken {plural(rec.previous_steps, 'sampled step')}: "
                       f"each new optimizer starts from empty state, so its momentum and Adam moments are thrown away "
                       f"every time; build it once, before the training loop")
            out.append(self.finding(message, where=rec.site, step=rec.first_step, evidence={
                "optimizer": rec.cls, "rebuilds_seen": rec.rebuilds, "first_step": rec.first_step,
                "parameters": rec.params}))
        return out
