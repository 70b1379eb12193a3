"""KBW038: dropout still dropping units while the model runs in eval mode.

Criterion: at least 2 times (on any step), a functional dropout (F.dropout and its 1d/2d/3d forms,
which nn.Dropout also calls) ran with training=True and p > 0, F.scaled_dot_product_attention ran
with dropout_p > 0 (it has no training flag; torch's own callers pass 0 in eval mode), or a 0/1 mask was drawn by hand with
one keep probability strictly between 0 and 1 (`x.new_empty(n).bernoulli_(1 - p)`,
`torch.bernoulli(torch.full_like(x, keep))`, or uniform draws of at least two values that the same
line of the user's code thresholds: `(torch.rand(x.shape) > p).float()`, `(torch.rand(n) + keep).floor()`;
a dropout or drop-path written in forward()), during a
call of a watched model whose `training` flag was False (between its forward pre hook and its
return): `F.dropout(x, p)` without `training=self.training`, an nn.Dropout built inside forward(),
or a mask drawn without `if self.training`, keeps dropping after `model.eval()`, so evaluation
outputs are random. A draw whose probabilities differ from element to element samples something
(binarised pixels, a policy's actions) and is not counted.

When the model holds nn.Dropout submodules whose own `training` flag is still True during those
calls (a submodule whose train() is overridden to do nothing, or one eval() never reached), the
finding names train-eval-mode instead: part of the model stayed in training mode.

Runs of at least MC_CALLS consecutive calls of the model on one input (equal fingerprints) are
Monte Carlo dropout, sampled on purpose (BALD, MC-dropout uncertainty): the dropout calls of every
call in such a run, the first included, are not counted. Two calls on one input (evaluating the
same batch two or three times and getting different answers) still count.
"""
from __future__ import annotations

import torch
from torch import nn

from kb_tools.watch.checks import ATTENTION_DROPOUT, Check, names, plural
from kb_tools.watch.checks.tensors import first_tensor, fingerprint

MC_CALLS = 5  # consecutive calls on one input that make a run of Monte Carlo sampling (T is 5 to 100 in practice)


def single_keep_probability(probability) -> float | None:
    """The keep probability of a Bernoulli draw when it is one number strictly between 0 and 1 (a
    tensor of equal values too): a dropout mask. None for per-element probabilities (sampling)."""
    if isinstance(probability, torch.Tensor):
        flat = probability.detach().reshape(-1)
        if flat.numel() == 0 or (flat.numel() > 1 and not bool((flat == flat[0]).all())):
            return None
        probability = flat[0]
    keep = float(probability)
    return keep if 0 < keep < 1 else None


class _Tally:
    """Dropout calls made while a model ran in eval mode, for one call of it or for the whole run."""
    __slots__ = ("calls", "module_calls", "steps", "stale", "model", "p", "kind")

    def __init__(self):
        self.calls = self.module_calls = 0
        self.steps: set = set()
        self.stale: list = []
        self.model = self.p = self.kind = None

    def add(self, other) -> None:
        self.calls += other.calls
        self.module_calls += other.module_calls
        self.steps |= set(sorted(other.steps)[:max(0, 64 - len(self.steps))])
        self.stale = self.stale or other.stale
        self.model = self.model or other.model
        self.p = self.p if self.p is not None else other.p
        self.kind = self.kind or other.kind


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
        self.training_dropouts = None  # names of the current model's nn.Dropout modules still in training mode
        self.total = _Tally()          # committed calls
        self.pending = _Tally()        # the calls of the latest eval-mode call of a model
        self.pending_input = None      # fingerprint of the input of the latest eval-mode call
        self.same_input_calls = 0      # consecutive calls on that input, the pending tally holds them all
        self.repeating = False         # at least MC_CALLS of them: Monte Carlo sampling

    def on_root_forward(self, model, grad_enabled):
        module = model.module
        self.current = model if module is not None and not module.training else None
        self.training_dropouts = None
        if self.current is None:
            self._commit()
            self.pending_input, self.same_input_calls = None, 0

    def on_root_input(self, model, args, grad_enabled):
        if self.current is not model:
            return
        x = first_tensor(args)
        fp = fingerprint(x) if x is not None else None
        if fp is not None and fp == self.pending_input:
            self.same_input_calls += 1
            if self.same_input_calls >= MC_CALLS:
                self.repeating = True      # Monte Carlo sampling: drop this run's tally as it grows
                self.pending = _Tally()
            return
        self._commit()
        self.pending_input, self.same_input_calls = fp, 1

    def on_root_output(self, model, output, grad_enabled):
        if self.current is model:  # its call is over: a dropout after it belongs to some other code
            self.current = None

    def _commit(self) -> None:
        if not self.repeating:
            self.total.add(self.pending)
        self.pending, self.repeating = _Tally(), False

    def on_dropout(self, p, training_given=True, kind="F.dropout"):
        if self.current is None:
            return
        t = self.pending
        t.kind = t.kind or kind
        t.calls += 1
        if self.training_dropouts is None:
            module = self.current.module
            self.training_dropouts = [] if module is None else [
                name for name, m in module.named_modules() if isinstance(m, nn.modules.dropout._DropoutNd) and m.training]
        if self.training_dropouts:
            t.module_calls += 1
            t.stale = t.stale or self.training_dropouts
        if len(t.steps) < 64:
            t.steps.add(self.session.step)
        t.model, t.p = t.model or self.current, t.p if t.p is not None else p

    def on_bernoulli(self, probability):
        """A mask drawn by hand during an eval-mode call counts as a dropout when its keep probability
        is one number (read only while a model runs in eval mode)."""
        if self.current is None:
            return
        keep = single_keep_probability(probability)
        if keep is not None:
            self.on_dropout(1 - keep)

    def on_uniform_mask(self, site):
        """A mask thresholded by hand from uniform draws (`(torch.rand(x.shape) > p).float()`) during an
        eval-mode call counts as a dropout of unknown probability."""
        if self.current is not None:
            self.on_dropout(None)

    def findings(self) -> list:
        tally = _Tally()
        tally.add(self.total)
        if not self.repeating:
            tally.add(self.pending)
        if tally.calls < 2:
            return []
        where = tally.model.site if tally.model is not None else None
        name = tally.model.cls if tally.model is not None else "the model"
        steps = tally.steps
        rate = f"p={tally.p:g}" if tally.p is not None else "a mask thresholded from uniform draws"
        if tally.kind == ATTENTION_DROPOUT:
            cause = f"{ATTENTION_DROPOUT} was given dropout_p={tally.p:g}, and the kernel has no training flag"
            fix = "; pass dropout_p=p if self.training else 0.0"
        else:
            cause = ("a functional dropout without training=self.training (or an nn.Dropout built in forward, or a "
                     "mask drawn in forward without `if self.training`) ignores model.eval()")
            fix = ""
        message = (f"dropout ({rate}) dropped units {plural(tally.calls, 'time')} on {plural(len(steps), 'step')} "
                   f"while {name} was in eval mode ({'created at ' + where if where else 'a watched model'}): "
                   f"{cause}, so evaluation outputs are random{fix}")
        evidence = {"dropout_calls_in_eval": tally.calls, "steps": sorted(steps)[:20], "p": tally.p, "model": name,
                    "kind": tally.kind}
        if tally.module_calls * 2 > tally.calls:
            message = (f"dropout ({rate}) dropped units {plural(tally.calls, 'time')} on "
                       f"{plural(len(steps), 'step')} while {name} was in eval mode "
                       f"({'created at ' + where if where else 'a watched model'}), and its nn.Dropout modules "
                       f"{names(tally.stale)} were still in training mode: model.eval() did not reach them (a train() "
                       f"override that does nothing, or a submodule switched back), so evaluation outputs are random; "
                       f"let train(mode) call super().train(mode), or set those modules to eval")
            evidence["dropout_modules_in_training_mode"] = tally.stale[:8]
            return [self.finding(message, evidence=evidence, where=where, step=min(steps), entry="train-eval-mode")]
        return [self.finding(message, evidence=evidence, where=where, step=min(steps))]
