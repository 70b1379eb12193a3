"""KBW102: gradient accumulation over micro-batches whose mean losses are never divided by the
number of micro-batches: the step applies the sum of the window's mean gradients, N times the
gradient of the whole batch (an N-times larger learning rate for SGD, a clipping threshold that
sees an N-times larger norm).

Criterion: on a sampled step, an optimizer's step() follows N >= 2 backward() calls, all from the
same line of the user's code, each of which wrote that optimizer's gradients, every one after the
first on top of the gradients the ones before left (not cleared in between) and after a new batch
(from the same DataLoader as the one before, or, with no DataLoader, a new call of the watched
model); and every tensor
handed to backward() is a mean as a loss function or `.mean()` returned it: its autograd node,
through views and a negation, is a Mean node or a loss node whose reduction is "mean", with no
constant factor applied after it (a GradScaler's power-of-two scale is looked through). A loss
divided or multiplied by any constant (the accumulation count, a token total), a sum-reduced loss
two backward() lines (a GAN discriminator's real and fake halves) or several losses of one forward
(or of several tasks' loaders) back-propagated one by one is not judged. Reported when
at least MIN_WINDOWS sampled steps show it and it holds on at least MIN_SHARE of the sampled steps
with such a window.
"""
from __future__ import annotations

import math

from kb_tools.watch.checks import Check, created_at, plural
from kb_tools.watch.checks.tensors import constant_factor, skip_view_nodes
from kb_tools.watch.sites import user_site

MIN_WINDOWS = 3
MIN_SHARE = 0.8
MEAN_NODES = ("MeanBackward0", "MeanBackward1")
REDUCTION_MEAN = 1   # torch's Reduction::Mean, as loss nodes save it


def undivided_mean(node) -> bool:
    """Is this autograd node (a backward() root) a mean, with nothing but views, a negation or a
    GradScaler's power-of-two scale after it?"""
    for _ in range(8):
        node = skip_view_nodes(node)
        if node is None:
            return False
        name = node.name()
        if name == "NegBackward0":
            node = node.next_functions[0][0]
            continue
        factor = constant_factor(node, host_only=True)
        if factor is not None:
            kind, value = factor
            if kind == "mul" and value >= 2 and math.log2(value).is_integer():  # a GradScaler's scale
                node = next((child for child, _ in node.next_functions if child is not None), None)
                continue
            return False
        if name in MEAN_NODES:
            return True
        reduction = getattr(node, "_saved_reduction", None)
        return name.endswith("LossBackward0") and reduction == REDUCTION_MEAN
    return False


def _new_batch(before: tuple, now: tuple) -> bool:
    """Between two backward() calls: a new batch of the same DataLoader, or with no DataLoader at all,
    a new call of the watched model."""
    (batches, loader, forwards), (batches2, loader2, forwards2) = before, now
    if loader2 is None:
        return forwards2 > forwards
    return batches2 > batches and loader2 == loader


class _Window:
    __slots__ = ("calls", "sites", "undivided", "stacked", "fresh", "last")

    def __init__(self):
        self.calls = 0
        self.sites: set = set()
        self.undivided = True
        self.stacked = True    # every backward() after the first added to the gradients already there
        self.fresh = True      # ... and came after a new batch of the same loader (or a new model call)
        self.last = None       # (batches yielded, loader, model calls) at the previous backward()


class AccumulatedMeansNotDivided(Check):
    __doc__ = __doc__
    code = "KBW102"
    name = "accumulated-means-not-divided"
    entry = "grad-accumulation-scaling"
    title = "gradient accumulation adds up micro-batch mean losses never divided by the number of micro-batches"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.windows: dict = {}   # id(optimizer) -> _Window of the step now accumulating
        self.pending = None       # (site, undivided, {id(optimizer): gradients present before}) of this backward()
        self.tally: dict = {}     # id(optimizer) -> [hits, windows of 2+ calls, first step, largest N, line]
        self.batches = 0          # DataLoader batches yielded so far, and the loader of the last one
        self.loader = None
        self.forwards = 0         # grad-enabled calls of a watched model so far

    def on_any_batch(self, loader, batch, serial):
        self.batches += 1
        self.loader = id(loader)

    def on_root_forward(self, model, grad_enabled):
        if grad_enabled:
            self.forwards += 1

    def on_before_backward(self, tensors):
        root = getattr(tensors[0], "grad_fn", None) if tensors else None
        s = self.session
        self.pending = (user_site(depth=3), root is not None and undivided_mean(root),
                        {id(opt): bool(s.grad_norm_before_backward(opt)) for opt in s.live_optimizers()},
                        (self.batches, self.loader, self.forwards))

    def on_after_backward(self, tensors):
        if self.pending is None:
            return
        site, undivided, before, data = self.pending
        self.pending = None
        for opt in self.session.live_optimizers():
            if not self.session.backward_wrote(opt):
                continue
            w = self.windows.setdefault(id(opt), _Window())
            if w.calls:
                w.stacked = w.stacked and before.get(id(opt), False)
                w.fresh = w.fresh and _new_batch(w.last, data)
            w.last = data
            w.calls += 1
            w.sites.add(site)
            w.undivided = w.undivided and undivided

    def on_step_pre(self, optimizer):
        w = self.windows.pop(id(optimizer), None)
        self.windows.clear()   # any step ends every window
        if w is None or w.calls < 2:
            return
        t = self.tally.setdefault(id(optimizer), [0, 0, None, 0, None])
        t[1] += 1
        if w.undivided and w.stacked and w.fresh and len(w.sites) == 1 and None not in w.sites:
            t[0] += 1
            if t[2] is None:
                t[2], t[4] = self.session.step, next(iter(w.sites))
            t[3] = max(t[3], w.calls)

    def findings(self) -> list:
        out = []
        for key, (hits, windows, step, calls, line) in self.tally.items():
            if hits < MIN_WINDOWS or hits < MIN_SHARE * windows:
                continue
            info = self.session.optimizers.get(key)
            site = info.site if info is not None else None
            message = (f"on {hits} of {plural(windows, 'sampled step')} with several backward() calls, step() summed "
                       f"up to {calls} micro-batch losses from backward() at {line}, each a mean never divided by the "
                       f"number of micro-batches ({created_at('optimizer', site)}): step() "
                       f"applies {calls}x the batch's mean gradient (as if the learning rate were {calls}x, and "
                       f"clipping sees a {calls}x norm); divide each micro-batch loss by the number of micro-batches")
            out.append(self.finding(message, where=line, step=step,
                                    evidence={"windows": hits, "sampled_windows": windows, "micro_batches": calls}))
        return out
