"""KBW072: an optimizer steps parameters the run no longer uses: it holds an older copy of the model.

Criterion: on at least 3 step() calls of sampled steps, an optimizer steps while none of its
parameters has a gradient, and the backward() before it left gradients on parameters of a watched
model that no optimizer holds. The model that was run and the model the optimizer was built for are two
objects: a deep copy sent to a worker each round while the worker keeps the optimizer of the
first round, a model rebuilt or reloaded after its optimizer was created. The new parameters get
gradients that nothing applies, the old ones get steps with nothing to apply. An optimizer that
steps with gradients, or a frozen network's parameters with no gradient, is not reported; a
replaced model that lives long enough for its parameters to be seen unchanged is KBW001's case
too, and this check reports the copies that each live a few steps.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, created_at, plural

MIN_STEPS = 3
MAX_LISTED = 8


class OptimizerStepsAStaleCopy(Check):
    __doc__ = __doc__
    code = "KBW072"
    name = "optimizer-steps-a-stale-copy"
    entry = "params-not-in-optimizer"
    title = "an optimizer steps with no gradient while the model that was run has gradients no optimizer holds"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.steps = 0
        self.first = None  # (step, optimizer class, site, models, orphaned tensors)

    def on_step_pre(self, optimizer):
        s = self.session
        if s.grad_norm(optimizer) is not None:
            return  # it has gradients: the usual case, one norm already computed for other checks
        trainable = s.trainable_ids()
        models, orphaned = [], 0
        for info in s.models:
            model = info.module
            if model is None:
                continue
            count = sum(1 for p in model.parameters() if p.grad is not None and id(p) not in trainable)
            if count:
                models.append(info.cls)
                orphaned += count
        if not orphaned:
            return
        self.steps += 1
        if self.first is None:
            info = s.optimizer_info(optimizer)
            self.first = (s.step, type(optimizer).__name__, info.site if info else None, models[:MAX_LISTED], orphaned)

    def findings(self) -> list:
        if self.steps < MIN_STEPS or self.first is None:
            return []
        step, cls, site, models, orphaned = self.first
        message = (f"{cls} ({created_at('optimizer', site)}) stepped with no gradient on any of its parameters at "
                   f"{plural(self.steps, 'step() call')} of sampled steps from step {step}, while the model that was run "
                   f"({', '.join(dict.fromkeys(models))}) had gradients on {plural(orphaned, 'parameter tensor')} that "
                   f"no optimizer holds: the optimizer was built for another copy of the model (a deepcopy, a rebuild, a "
                   f"reload) and steps that one; build the optimizer for the model that is trained, or load new "
                   f"weights into the existing model with load_state_dict")
        return [self.finding(message, where=site, step=step, evidence={
            "steps_without_gradient": self.steps, "first_step": step, "optimizer": cls,
            "models_with_orphaned_gradients": models, "orphaned_tensors": orphaned})]
