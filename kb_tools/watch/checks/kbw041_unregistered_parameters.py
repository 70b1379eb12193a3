"""KBW041: parameters the forward pass uses that no model registers and no optimizer holds.

Criterion: on at least 3 sampled steps of a run whose optimizers step, the backward() graph
reaches nn.Parameter leaves that require grad, belong to no watched model's parameters() and to
no optimizer (the graph is walked on the first MAX_WALKS sampled backward() calls, at most
20,000 nodes each). Modules kept in a plain Python list or dict are called in forward() but are
not submodules, so their weights get gradients and never train, are not saved in state_dict()
and are not moved by .to(). A parameter registered directly on a module of the user's own class
(not a torch.nn layer) is left alone: that module, an ensemble with a learnable scale say, is
simply not trained yet.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, created_at, plural
from kb_tools.watch.checks.tensors import graph_leaves

MIN_STEPS = 3
MAX_WALKS = 6
MAX_LEAVES = 4096


def _owned_by_user_modules(session) -> set:
    """ids of the parameters registered directly on a module of the user's own class created while
    watching: an ensemble holding a learnable scale that no optimizer holds yet is registered, only
    not trained for now; a layer kept in a list (a torch.nn class) owns its weights just as well, so
    torch's own classes do not count."""
    out = set()
    for module in list(session.module_sites.keys()):
        if not type(module).__module__.startswith("torch."):
            out.update(id(p) for p in module.parameters(recurse=False))
    return out


class UnregisteredParameters(Check):
    __doc__ = __doc__
    code = "KBW041"
    name = "unregistered-parameters"
    entry = "modules-in-python-list"
    title = "parameters used in forward() that no model registers and no optimizer holds (modules in a plain list)"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.walks = 0
        self.steps: set[int] = set()
        self.shapes: list[str] = []
        self.count = 0

    def on_before_backward(self, tensors):
        s = self.session
        if self.walks >= MAX_WALKS or not s.optimizers or not s.models:
            return
        self.walks += 1
        registered = {id(p) for m in s.models if m.module is not None for p in m.module.parameters()}
        held = s.trainable_ids()
        loose = [t for t in graph_leaves(tensors, MAX_LEAVES) if isinstance(t, torch.nn.Parameter)
                 and t.requires_grad and id(t) not in registered and id(t) not in held]
        if loose:
            owned = _owned_by_user_modules(s)
            loose = [t for t in loose if id(t) not in owned]
        if loose:
            self.steps.add(s.step)
            self.count = max(self.count, len(loose))
            if not self.shapes:
                self.shapes = [str(tuple(t.shape)) for t in loose[:6]]

    def findings(self) -> list:
        if len(self.steps) < MIN_STEPS or not any(info.steps for info in self.session.optimizers.values()):
            return []
        where = self.session.where()
        models = ", ".join(m.cls for m in self.session.models[:3])
        message = (f"{plural(self.count, 'parameter')} (shapes {', '.join(self.shapes)}) took part in the forward pass "
                   f"on {plural(len(self.steps), 'sampled step')} but belong to no model's parameters() ({models}) and "
                   f"to no optimizer ({created_at('optimizer', where)}): modules held in a plain list or dict are not "
                   f"registered, so they never train, are not saved and are not moved by .to(); use nn.ModuleList or "
                   f"nn.ModuleDict")
        return [self.finding(message, where=where, step=min(self.steps),
                             evidence={"parameters": self.count, "shapes": self.shapes, "steps": sorted(self.steps)})]
