"""KBW040: biases or normalization gains in a weight-decayed group, while a no-decay group exists.

Criterion: an optimizer has at least one param group with weight_decay 0 and at least one with
weight_decay > 0 (so the run meant to exempt some parameters), and a decayed group holds at least
one 1-D parameter of a watched model that is a bias or the weight of a normalization layer
(BatchNorm, LayerNorm, GroupNorm, InstanceNorm, RMSNorm, or a model's own module class whose name
ends in Norm, Norm1d or Norm2d, as LLaMA-style RMSNorm and LayerNorm2d are written): the filter that
splits the groups, by name or by norm type, missed them (e.g. "LayerNorm.weight" against a model
whose norms are called "ln_f" or "norm"). An optimizer with a single decay for everything is not judged: that may be the intent.
"""
from __future__ import annotations

import weakref

import torch

import re

from kb_tools.watch.checks import Check, created_at, names, plural

MAX_OPTIMIZERS = 64  # optimizers looked at (one rebuilt every step must not grow this without bound)
_NORMS = tuple(t for t in (torch.nn.modules.batchnorm._BatchNorm, torch.nn.LayerNorm, torch.nn.GroupNorm,
                           torch.nn.modules.instancenorm._InstanceNorm, getattr(torch.nn, "RMSNorm", None)) if t)
_NORM_NAME = re.compile(r"norm([123]d)?$", re.IGNORECASE)  # a model's own RMSNorm, T5LayerNorm, LayerNorm2d


def _is_norm(module) -> bool:
    return isinstance(module, _NORMS) or bool(_NORM_NAME.search(type(module).__name__))


class NormsDecayedBesideNoDecayGroup(Check):
    __doc__ = __doc__
    code = "KBW040"
    name = "norms-decayed-beside-no-decay-group"
    entry = "adamw-decay-groups"
    title = "biases or norm gains in a weight-decayed group although a no-decay group exists"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.looked: weakref.WeakSet = weakref.WeakSet()  # weak: a dropped optimizer's id can be reused
        self.found: dict[int, tuple] = {}  # id(optimizer) -> (optimizer info, names, decay)

    def on_step_pre(self, optimizer):
        if optimizer in self.looked or len(self.looked) >= MAX_OPTIMIZERS:
            return
        self.looked.add(optimizer)
        groups = optimizer.param_groups
        decays = [float(g.get("weight_decay", 0) or 0) for g in groups]
        if not any(d == 0 for d in decays) or not any(d > 0 for d in decays):
            return
        s = self.session
        norms = {id(p) for m in s.models if m.module is not None for sub in m.module.modules()
                 if _is_norm(sub) for p in sub.parameters(recurse=False)}
        missed = []
        for group, decay in zip(groups, decays):
            if decay <= 0:
                continue
            for p in group["params"]:
                name = s.param_names.get(id(p))
                if name is None or p.dim() != 1:
                    continue
                if id(p) in norms or name.rsplit(".", 1)[-1] == "bias":
                    missed.append(name)
        if missed:
            self.found[id(optimizer)] = (s.optimizer_info(optimizer), missed, max(decays))

    def findings(self) -> list:
        out = []
        for info, missed, decay in self.found.values():
            site = info.site if info is not None else None
            message = (f"{plural(len(missed), 'bias or norm parameter')} ({names(missed)}) sit in a param group with "
                       f"weight_decay={decay:g} although the {created_at('optimizer', site)} has a no-decay group: "
                       f"the filter that routes biases and norm gains to it missed these names")
            out.append(self.finding(message, where=site, step=0, evidence={
                "parameters": missed[:50], "count": len(missed), "weight_decay": decay}))
        return out
