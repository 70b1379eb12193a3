"""KBW038: dropout still dropping units while the model runs in eval mode.

Criterion: at least 2 times (on any step), a functional dropout (F.dropout and its 1d/2d/3d forms,
which nn.Dropout also calls) ran with training=True and p > 0 during a call of a watched model
whose `training` flag was False (between its forward pre hook and its return): `F.dropout(x, p)`
without `training=self.training`, or an nn.Dropout built inside forward(), keeps dropping after
`model.eval()`, so evaluation outputs are random.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, plural


class DropoutInEval(Check):
    __doc__ = __doc__
    code = "KBW038"
    name = "dropout-in-eval"
    entry = "functional-dropout-in-eval"
    title = "dropout dropping units inside a model that is in eval mode: training=self.training not passed"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.current = None  # the model info of the last call, when it ran in eval mode
        self.steps: set[int] = set()
        self.calls = 0
        self.model = None
        self.p = None

    def on_root_forward(self, model, grad_enabled):
        module = model.module
        self.current = model if module is not None and not module.training else None

    def on_root_output(self, model, output, grad_enabled):
        if self.current is model:  # its call is over: a dropout after it belongs to some other code
            self.current = None

    def on_dropout(self, p):
        if self.current is None:
            return
        self.calls += 1
        if len(self.steps) < 64:
            self.steps.add(self.session.step)
        self.model, self.p = self.model or self.current, self.p if self.p is not None else p

    def findings(self) -> list:
        if self.calls < 2:
            return []
        where = self.model.site if self.model is not None else None
        name = self.model.cls if self.model is not None else "the model"
        message = (f"dropout (p={self.p:g}) dropped units {plural(self.calls, 'time')} on {plural(len(self.steps), 'step')} "
                   f"while {name} was in eval mode ({'created at ' + where if where else 'a watched model'}): a "
                   f"functional dropout without training=self.training (or an nn.Dropout built in forward) ignores "
                   f"model.eval(), so evaluation outputs are random")
        evidence = {"dropout_calls_in_eval": self.calls, "steps": sorted(self.steps)[:20], "p": self.p, "model": name}
        return [self.finding(message, evidence=evidence, where=where, step=min(self.steps))]
