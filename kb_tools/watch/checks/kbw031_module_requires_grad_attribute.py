"""KBW031: `module.requires_grad = False` written on a module, which freezes nothing.

Criterion: a module of a watched model has `requires_grad` set to False as a plain instance
attribute (nn.Module has no such property: the write only stores a Python attribute), while at
least one of its own parameters still requires grad and is held by an optimizer that stepped.
Exact: torch never reads that attribute, so the parameters the line meant to freeze keep training.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, created_at, names, plural

MAX_MODULES = 64  # modules remembered; a model with more such attributes is reported by the first ones


class ModuleRequiresGradAttribute(Check):
    __doc__ = __doc__
    code = "KBW031"
    name = "module-requires-grad-attribute"
    entry = "module-requires-grad-attribute"
    title = "requires_grad = False written on a module, whose parameters keep training"
    confidence = 0.97

    def __init__(self, session):
        super().__init__(session)
        self.modules: dict[str, tuple[int, int]] = {}  # module name -> (trainable parameters, first step)

    def on_step_pre(self, optimizer):
        s = self.session
        if s.optimizer_info(optimizer) is not s.primary_info():
            return  # once per step, at the primary optimizer
        held = None
        for model in s.models:
            root = model.module
            if root is None:
                continue
            for module in root.modules():
                if vars(module).get("requires_grad", True) is not False:
                    continue
                name = s.module_name(module)
                if name in self.modules or len(self.modules) >= MAX_MODULES:
                    continue
                held = s.trainable_ids() if held is None else held
                live = sum(1 for p in module.parameters() if p.requires_grad and id(p) in held)
                if live:
                    self.modules[name] = (live, s.step)

    def findings(self) -> list:
        if not self.modules or not any(info.steps for info in self.session.optimizers.values()):
            return []
        where = self.session.where()
        listed = sorted(self.modules)
        count = sum(n for n, _ in self.modules.values())
        message = (f"`requires_grad = False` is a plain attribute on {plural(len(listed), 'module')} "
                   f"({names(listed)}): {plural(count, 'parameter')} there still require grad and are "
                   f"updated by the {created_at('optimizer', where)}; use `.requires_grad_(False)` "
                   f"on the module")
        evidence = {"modules": listed[:50], "trainable_parameters": count,
                    "first_seen_step": min(step for _, step in self.modules.values())}
        return [self.finding(message, evidence=evidence, where=where,
                             step=min(step for _, step in self.modules.values()))]
