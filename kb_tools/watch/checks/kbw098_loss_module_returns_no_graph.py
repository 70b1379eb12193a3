"""KBW098: a loss module that takes in the model's output with its graph and returns a value without
one: the term is computed, weighted and logged, but trains nothing.

Criterion: on at least MIN_STEPS sampled steps, a module whose class name says it is a loss (holds
"loss" or "criterion", not "meter", "metric", "tracker", "logger" or "average") and is not one of
torch's own loss classes runs with grad enabled from start to end, receives among its arguments (3
levels deep) a floating tensor whose graph reaches the parameters of a live optimizer, runs no
backward() itself, and returns floating tensors (a tensor, or a tuple, list or dict holding them)
none of which requires grad: a `.detach()` around the whole difference where only the target's
side was meant, `.item()` or `.data` inside, a metric class's `__call__` that detaches its inputs.
A loss module that returns a graph-carrying value, even beside logged floats, is not counted.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, created_at, plural
from kb_tools.watch.checks.tensors import iter_tensors, reaches_trained

MIN_STEPS = 3
MAX_SITES = 16
MAX_WALKS = 64
MAX_LEAVES = 4096
MAX_OPEN = 8
NOT_A_LOSS = ("meter", "metric", "tracker", "logger", "average", "accum")


def _names_a_loss(cls, cache: dict) -> bool:
    found = cache.get(cls)
    if found is None:
        name = cls.__name__.lower()
        found = cache[cls] = ("loss" in name or "criterion" in name) and not any(w in name for w in NOT_A_LOSS) \
            and not cls.__module__.startswith("torch.")
    return found


class LossModuleReturnsNoGraph(Check):
    __doc__ = __doc__
    code = "KBW098"
    name = "loss-module-returns-no-graph"
    entry = "loss-detached-from-graph"
    title = "a loss module fed the model's output with its graph returns a value without one: the term trains nothing"
    confidence = 0.75

    def __init__(self, session):
        super().__init__(session)
        self.classes: dict = {}
        self.open: dict = {}      # id(module) -> backward calls when its call began (while its call runs)
        self.walks = 0
        self.sites: dict = {}     # (class name, site) -> [steps seen, last step, first step]

    def on_module_input(self, module, args):
        if not torch.is_grad_enabled() or not _names_a_loss(type(module), self.classes) or len(self.open) >= MAX_OPEN:
            return
        for value in iter_tensors(args):
            if value.is_floating_point() and value.grad_fn is not None:
                if self._trains(value):
                    self.open[id(module)] = self.session.backward_calls
                return

    def on_module_forward(self, module, output, grad_enabled):
        began = self.open.pop(id(module), None)
        if began is None or not grad_enabled or self.session.backward_calls != began:
            return
        values = [t for t in iter_tensors(output) if t.is_floating_point()]
        if not values or any(t.requires_grad for t in values):
            return
        key = (type(module).__name__, self.session.module_sites.get(module))
        st = self.sites.get(key)
        if st is None:
            if len(self.sites) >= MAX_SITES:
                return
            st = self.sites[key] = [0, None, self.session.step]
        if st[1] != self.session.step:
            st[0] += 1
            st[1] = self.session.step

    def on_any_step_pre(self, optimizer):
        self.open = {}

    def _trains(self, tensor) -> bool:
        """Does this tensor's graph reach a parameter of a live optimizer (the model's output)?"""
        if self.walks >= MAX_WALKS:
            return False
        self.walks += 1
        return reaches_trained(self.session, tensor, MAX_LEAVES)

    def findings(self) -> list:
        out = []
        for (cls, site), (steps, _, first) in self.sites.items():
            if steps < MIN_STEPS:
                continue
            message = (f"{cls} ({created_at('loss module', site)}) received the model's output with its graph and "
                       f"returned a value without one on {plural(steps, 'sampled step')} from step {first}: "
                       f"something inside it (`.detach()` around the whole difference, `.item()`, `.data`, a metric "
                       f"that detaches its inputs) cut the graph, so the term is weighted and logged but gives the "
                       f"model no gradient; detach only the target's side, or compute the term from tensors that "
                       f"keep their graph")
            out.append(self.finding(message, where=site, step=first, evidence={
                "loss_module": cls, "sampled_steps": steps, "first_step": first}))
        return out
