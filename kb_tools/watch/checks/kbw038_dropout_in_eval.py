"""KBW038: dropout still dropping units while the model runs in eval mode.

Criterion: at least 2 times (on any step), a functional dropout (F.dropout and its 1d/2d/3d forms,
which nn.Dropout also calls) ran with training=True and p > 0 during a call of a watched model
whose `training` flag was False (between its forward pre hook and its return): `F.dropout(x, p)`
without `training=self.training`, or an nn.Dropout built inside forward(), keeps dropping after
`model.eval()`, so evaluation outputs are random.

When the model holds nn.Dropout submodules whose own `training` flag is still True during those
calls (a submodule whose train() is overridden to do nothing, or one eval() never reached), the
finding names train-eval-mode instead: part of the model stayed in training mode.
"""
from __future__ import annotations

from torch import nn

from kb_tools.watch.checks import Check, names, plural


class DropoutInEval(Check):
    __doc__ = __doc__
    code = "KBW038"
    name = "dropout-in-eval"
    entry = "functional-dropout-in-eval"
    also = ("train-eval-mode",)
    title = "dropout dropping units inside a model that is in eval mode: training=self.training not passed"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.current = None  # the model info of the last call, when it ran in eval mode
        self.steps: set[int] = set()
        self.calls = 0
        self.model = None
        self.p = None
        self.training_dropouts = None  # names of the current model's nn.Dropout modules still in training mode
        self.module_calls = 0          # dropout calls made while such modules existed
        self.stale: list = []          # their names, from the first such call

    def on_root_forward(self, model, grad_enabled):
        module = model.module
        self.current = model if module is not None and not module.training else None
        self.training_dropouts = None

    def on_root_output(self, model, output, grad_enabled):
        if self.current is model:  # its call is over: a dropout after it belongs to some other code
            self.current = None

    def on_dropout(self, p):
        if self.current is None:
            return
        self.calls += 1
        if self.training_dropouts is None:
            module = self.current.module
            self.training_dropouts = [] if module is None else [
                name for name, m in module.named_modules() if isinstance(m, nn.modules.dropout._DropoutNd) and m.training]
        if self.training_dropouts:
            self.module_calls += 1
            self.stale = self.stale or self.training_dropouts
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
        if self.module_calls * 2 > self.calls:
            message = (f"dropout (p={self.p:g}) dropped units {plural(self.calls, 'time')} on "
                       f"{plural(len(self.steps), 'step')} while {name} was in eval mode "
                       f"({'created at ' + where if where else 'a watched model'}), and its nn.Dropout modules "
                       f"{names(self.stale)} were still in training mode: model.eval() did not reach them (a train() "
                       f"override that does nothing, or a submodule switched back), so evaluation outputs are random; "
                       f"let train(mode) call super().train(mode), or set those modules to eval")
            evidence["dropout_modules_in_training_mode"] = self.stale[:8]
            return [self.finding(message, evidence=evidence, where=where, step=min(self.steps), entry="train-eval-mode")]
        return [self.finding(message, evidence=evidence, where=where, step=min(self.steps))]
