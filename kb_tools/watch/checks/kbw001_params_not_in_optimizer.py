"""KBW001: parameters that get a gradient at every step and never move, because no optimizer that
steps holds them.

Criterion: a parameter of a watched model requires grad, is in no optimizer's param_groups, or only
in those of optimizers that have not stepped yet (one built for it but never stepped: the other
network's optimizer passed in its place), has a non-zero .grad at step() on at least 3 sampled
steps, and is bit-for-bit unchanged from the first of them to the end of the run, while the
optimizers stepped at least 3 times. A parameter that other code updates (an EMA, a manual SGD
step, its own optimizer stepping later) changes, and is not reported. A .grad that no backward
touched since the last sampled step (the same tensor at the same version: left over from an
earlier phase, as a boosting stage's finished learner keeps its last gradient) does not count.

When the optimizer that holds them exists but never stepped, at least a quarter of all backward
passes had no optimizer step after them, and no optimizer stepped again with no backward() into
its own gradient since its previous step, its step() is never called: the finding names
optimizer-step-order. Otherwise another optimizer is stepped in its place (after the other
network's backward), and the finding stays params-not-in-optimizer.
"""
from __future__ import annotations

import weakref

import torch

from kb_tools.watch.checks import Check, created_at, names, plural
from kb_tools.watch.checks.tensors import value_fingerprint

MIN_GRAD_STEPS = 3
UNAPPLIED_SHARE = 0.25  # backward passes with no optimizer step after them, of all: a step() never called
SNAPSHOT_NUMEL = 1 << 20   # a parameter up to this size is copied; a larger one keeps a fingerprint
SNAPSHOT_BUDGET = 1 << 26  # elements copied in all, whatever the model


class _Tracked:
    __slots__ = ("ref", "name", "snapshot", "first_step", "verified", "grad_steps", "grad_norm", "changed", "numel",
                 "idle", "grad_seen")

    def __init__(self, p, name, snapshot, step):
        # a strong reference: the last look (on_end) must see the parameter even when the run's
        # own code has dropped it; only parameters outside every optimizer that got a gradient
        # are held, of at most session.MAX_LISTED models
        self.ref, self.name, self.snapshot, self.first_step = p, name, snapshot, step
        self.verified = step  # the last step at which it was seen unchanged
        self.grad_steps, self.grad_norm, self.changed, self.numel = 0, 0.0, False, p.numel()
        self.idle = None  # the info of an optimizer that holds it but had not stepped when tracking began
        self.grad_seen = None  # (weak reference to the .grad counted last, its version then)


class ParamsNotInOptimizer(Check):
    __doc__ = __doc__
    code = "KBW001"
    name = "params-not-in-optimizer"
    entry = "params-not-in-optimizer"
    also = ("optimizer-step-order",)
    title = "parameters that get gradients but never change, because no optimizer holds them"
    confidence = 0.95

    def __init__(self, session):
        super().__init__(session)
        self.tracked: dict[int, _Tracked] = {}
        self.budget = SNAPSHOT_BUDGET
        self.last_steps: dict[int, int] = {}   # id(optimizer) -> its last sampled step
        self.written: dict[int, bool] = {}     # id(optimizer) -> a backward() changed its gradient since that step
        self.repeated_steps = 0  # sampled steps taken with no backward() into the optimizer since its previous one

    def on_after_backward(self, tensors):
        for opt in self.session.live_optimizers():
            if self.session.backward_wrote(opt):
                self.written[id(opt)] = True

    def _snapshot(self, p):
        if p.numel() <= min(SNAPSHOT_NUMEL, self.budget):
            self.budget -= p.numel()
            return p.detach().clone()
        return value_fingerprint(p)

    def _verify(self, t: _Tracked, p) -> bool:
        """Whether `p` still holds the value it had when tracking began; records the answer."""
        same = torch.equal(t.snapshot, p.detach()) if isinstance(t.snapshot, torch.Tensor) \
            else value_fingerprint(p) == t.snapshot
        if same:
            t.verified = self.session.step
        else:
            t.changed, t.snapshot, t.ref = True, None, None
        return same

    def on_step_pre(self, optimizer):
        s = self.session
        # an optimizer stepped again with no backward() writing into its gradient since its previous
        # step (both seen): it was stepped on another network's loss, in that optimizer's place
        last = self.last_steps.get(id(optimizer))
        if last == s.step - 1 and not self.written.get(id(optimizer)) and s.grad_norm(optimizer):
            self.repeated_steps += 1
        self.last_steps[id(optimizer)] = s.step
        self.written[id(optimizer)] = False
        if s.optimizer_info(optimizer) is not s.primary_info():
            return  # once per step, at the primary optimizer
        held, idle = set(), {}  # ids held by an optimizer that has stepped; id -> a holder that has not
        for info in s.optimizers.values():
            if info.optimizer is not None:
                for q in s.params_of(info.optimizer):
                    if info.steps > 0:
                        held.add(id(q))
                    else:
                        idle.setdefault(id(q), info)
        for model in s.models:
            module = model.module
            if module is None:
                continue
            for p in module.parameters():
                key = id(p)
                if key in held:
                    self.tracked.pop(key, None)  # added to an optimizer later, or its optimizer stepped
                    continue
                if not p.requires_grad:  # frozen for now (a GAN's other phase): judged when it has a gradient
                    continue
                t = self.tracked.get(key)
                if t is not None and (t.changed or t.ref is not p):
                    continue
                grad = p.grad
                if grad is None or not bool(grad.detach().ne(0).any()):
                    continue
                if t is None:
                    t = self.tracked[key] = _Tracked(p, s.param_name(p), self._snapshot(p), s.step)
                    t.idle = idle.get(key)
                elif not self._verify(t, p):
                    continue
                if t.grad_seen is not None and t.grad_seen[0]() is grad and t.grad_seen[1] == grad._version:
                    continue  # no backward wrote this gradient since it was counted: a stale one
                t.grad_seen = (weakref.ref(grad), grad._version)
                t.grad_steps += 1
                t.grad_norm = max(t.grad_norm, float(grad.detach().norm()))

    def on_end(self):
        for t in self.tracked.values():  # a last look, in case it moved after the last sampled step
            if not t.changed:
                self._verify(t, t.ref)

    def findings(self) -> list:
        s = self.session
        stuck = [t for t in self.tracked.values() if not t.changed and t.grad_steps >= MIN_GRAD_STEPS]
        optimizers = list(s.optimizers.values())
        if not stuck or sum(info.steps for info in optimizers) < MIN_GRAD_STEPS:
            return []
        span = max(t.verified for t in stuck) - min(t.first_step for t in stuck)
        sites = [info.site for info in optimizers if info.site]
        idle = next((t.idle for t in stuck if t.idle is not None and t.idle.steps == 0), None)
        steps = sum(info.steps for info in optimizers)
        entry = None
        if idle is not None and not self.repeated_steps and s.backward_calls - steps >= UNAPPLIED_SHARE * s.backward_calls:
            held_by = (f"the optimizer that holds them, {idle.cls} ({created_at('optimizer', idle.site)}), never "
                       f"stepped: {plural(s.backward_calls, 'backward pass', 'backward passes')} against "
                       f"{plural(steps, 'optimizer step')} in all, so the gradients its loss leaves are never applied; "
                       f"call its step() after that backward()")
            entry = "optimizer-step-order"
        elif idle is not None:
            held_by = (f"the optimizer that holds them, {idle.cls} ({created_at('optimizer', idle.site)}), never "
                       f"stepped: another optimizer is stepped in its place")
        elif len(optimizers) == 1:
            held_by = f"not in any optimizer ({created_at('optimizer', optimizers[0].site)})"
        else:
            held_by = f"in none of the {len(optimizers)} optimizers (created at {', '.join(sites) or 'unknown places'})"
        message = (f"{plural(len(stuck), 'parameter')} ({names([t.name for t in stuck])}) got gradients for "
                   f"{plural(span, 'step')} but never changed; {held_by}")
        evidence = {
            "parameters": [t.name for t in stuck][:50],
            "count": len(stuck),
            "elements": sum(t.numel for t in stuck),
            "sampled_steps_with_gradient": min(t.grad_steps for t in stuck),
            "largest_grad_norm": max(t.grad_norm for t in stuck),
            "unchanged_from_step": min(t.first_step for t in stuck),
            "unchanged_until_step": max(t.verified for t in stuck),
            "optimizers": [{"class": info.cls, "site": info.site, "steps": info.steps} for info in optimizers],
            "backward_calls": s.backward_calls,
        }
        return [self.finding(message, evidence=evidence, where=sites[0] if sites else None,
                             step=min(t.first_step for t in stuck), entry=entry)]
