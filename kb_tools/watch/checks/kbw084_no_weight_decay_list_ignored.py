"""KBW084: parameters a model lists in its no_weight_decay() sit in a weight-decayed group
(adamw-decay-groups).

Criterion: at the first sampled step of an optimizer that has a param group with weight_decay 0
and one with weight_decay > 0 (so the run meant to exempt some parameters), a module of a watched
model whose class defines no_weight_decay() (the timm convention: position embeddings, class
tokens, relative-position tables) names parameters of its own, and at least one of them is in a
decayed group. The grouping helper asked the wrong object for the list (a DDP or EMA wrapper
that has no such method, so hasattr() said no and the skip set came out empty) or matched the
names against other prefixes; weight decay then pulls those embeddings toward zero all run long.
"""
from __future__ import annotations

import weakref

from kb_tools.watch.checks import Check, created_at, names, plural

MAX_OPTIMIZERS = 64
MAX_MODULES = 256


def listed_parameters(module) -> dict:
    """{id(parameter): name} of the parameters module.no_weight_decay() names (exact names, or
    prefixes of parameter names, as timm writes them); {} when it has none or the call fails."""
    method = getattr(type(module), "no_weight_decay", None)
    if not callable(method):
        return {}
    try:
        listed = set(module.no_weight_decay())
    except Exception:  # noqa: BLE001 - the user's method: anything may go wrong, and then we say nothing
        return {}
    out = {}
    for name, param in module.named_parameters():
        if name in listed or any(name.startswith(f"{item}.") for item in listed if isinstance(item, str)):
            out[id(param)] = name
    return out


class NoWeightDecayListIgnored(Check):
    __doc__ = __doc__
    code = "KBW084"
    name = "no-weight-decay-list-ignored"
    entry = "adamw-decay-groups"
    title = "parameters a model lists in no_weight_decay() are in a weight-decayed param group"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.looked: weakref.WeakSet = weakref.WeakSet()  # weak: a dropped optimizer's id can be reused
        self.found: dict = {}   # optimizer info id -> (owner class, names, decay, optimizer info, step)

    def on_step_pre(self, optimizer):
        s = self.session
        if optimizer in self.looked or len(self.looked) >= MAX_OPTIMIZERS:
            return
        self.looked.add(optimizer)
        decays = [float(g.get("weight_decay", 0.0) or 0.0) for g in optimizer.param_groups]
        if not any(d == 0 for d in decays) or not any(d > 0 for d in decays):
            return
        decayed = {id(p): d for g, d in zip(optimizer.param_groups, decays) if d > 0 for p in g["params"]}
        seen = 0
        for model in s.models:
            root = model.module
            if root is None:
                continue
            for module in root.modules():
                seen += 1
                if seen > MAX_MODULES:
                    return
                listed = listed_parameters(module)
                hits = [(name, decayed[key]) for key, name in listed.items() if key in decayed]
                if hits:
                    info = s.optimizer_info(optimizer)
                    self.found[id(info)] = (type(module).__name__, [n for n, _ in hits], max(d for _, d in hits),
                                            info, s.step)
                    return

    def findings(self) -> list:
        out = []
        for owner, listed, decay, info, step in self.found.values():
            where = created_at("optimizer", info.site) if info is not None else "the optimizer"
            out.append(self.finding(
                f"{plural(len(listed), 'parameter')} that {owner}.no_weight_decay() lists ({names(listed)}) "
                f"{'is' if len(listed) == 1 else 'are'} in a param group with weight_decay {decay:g} of "
                f"{info.cls if info is not None else 'the optimizer'} ({where}), beside a group without decay: "
                f"the grouping asked another object for the list (a DDP or EMA wrapper has no no_weight_decay(), "
                f"so the skip set came out empty); build the groups from the unwrapped model (model.module)",
                where=info.site if info is not None else None, step=step,
                evidence={"module": owner, "parameters": listed, "weight_decay": decay}))
        return out
