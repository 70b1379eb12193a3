"""KBW070: a module's parameter is a new nn.Parameter at every step, and no optimizer holds it.

Criterion: on at least 3 sampled steps, and on every sampled step it was looked at, the parameter
a watched model holds under one name is a different object from the one it held at the previous
sampled step, requires grad, has a gradient at step(), and is in no optimizer. Re-wrapping a
weight in nn.Parameter does this: `self.weight = nn.Parameter(normalize(self.weight))` in
forward, or a constraint applied after step() the same way. Each new Parameter is a leaf that
gets a gradient and is dropped; the tensor the optimizer holds is no longer in the model, so the
layer never learns. A weight kept under a parametrization, or replaced once with the optimizer
rebuilt, is the same object from step to step or is in an optimizer, and is not reported.
"""
from __future__ import annotations

import weakref

from kb_tools.watch.checks import Check, created_at, names, plural

MIN_REPLACED = 3
MAX_NAMES = 4096  # parameter names followed, whatever the model


class _Name:
    __slots__ = ("label", "last", "replaced", "stayed", "first_step", "shape", "held_first")

    def __init__(self, label, p, step, held_first):
        self.label, self.last = label, weakref.ref(p)
        self.replaced = self.stayed = 0
        self.first_step, self.shape, self.held_first = step, tuple(p.shape), held_first


class ParameterReplacedEachStep(Check):
    __doc__ = __doc__
    code = "KBW070"
    name = "parameter-replaced-each-step"
    entry = "params-not-in-optimizer"
    title = "a module's parameter re-created as a new nn.Parameter at every step, outside every optimizer"
    confidence = 0.95

    def __init__(self, session):
        super().__init__(session)
        self.names: dict[tuple, _Name] = {}
        self.held: set[tuple] = set()  # names under which an optimizer's parameter was seen

    def on_step_pre(self, optimizer):
        s = self.session
        primary = s.primary_info()
        if primary is None or primary.optimizer is not optimizer:
            return
        trainable = s.trainable_ids()
        for info in s.models:
            model = info.module
            if model is None:
                continue
            for name, p in model.named_parameters():
                key = (id(model), name)
                if id(p) in trainable:
                    if len(self.held) < MAX_NAMES:
                        self.held.add(key)
                    continue
                if not p.requires_grad or p.grad is None:
                    continue
                seen = self.names.get(key)
                if seen is None:
                    if len(self.names) < MAX_NAMES:
                        label = f"{info.prefix}{name}"
                        # the optimizer's tensor was under this name before: seen there, or named so when the model was found
                        held = key in self.held or label in {s.param_names.get(i) for i in trainable}
                        self.names[key] = _Name(label, p, s.step, held)
                    continue
                if seen.last() is p:
                    seen.stayed += 1
                else:
                    seen.replaced += 1
                    seen.last = weakref.ref(p)

    def findings(self) -> list:
        hits = [n for n in self.names.values() if n.replaced >= MIN_REPLACED and not n.stayed]
        if not hits:
            return []
        s = self.session
        held = [n for n in hits if n.held_first]
        message = (f"{plural(len(hits), 'parameter')} ({names([n.label for n in hits])}) "
                   f"{'was a new object' if len(hits) == 1 else 'were new objects'} at each of "
                   f"{min(n.replaced for n in hits) + 1} sampled steps, each with a gradient and in no optimizer "
                   f"({created_at('optimizer', s.where())}): the weight is re-wrapped in nn.Parameter (in forward, "
                   f"or after step()), so each new one is a leaf whose gradient is dropped")
        if held:
            message += "; the optimizer holds the tensor that was there first, which the model no longer uses"
        message += (": normalize or constrain it functionally (F.linear(x, F.normalize(self.weight))), or in place "
                    "under torch.no_grad()")
        evidence = {"parameters": [{"name": n.label, "shape": list(n.shape), "replaced_on_sampled_steps": n.replaced,
                                    "first_step": n.first_step, "optimizer_held_the_first": n.held_first}
                                   for n in hits[:20]]}
        return [self.finding(message, evidence=evidence, where=s.where(), step=min(n.first_step for n in hits))]
