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

from kb_tools.watch.checks import created_at, plural
from kb_tools.watch.checks.accumulation import REDUCTION_MEAN, MicroBatchWindows
from kb_tools.watch.checks.tensors import constant_factor, skip_view_nodes

MIN_WINDOWS = 3
MIN_SHARE = 0.8
MEAN_NODES = ("MeanBackward0", "MeanBackward1")


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


class AccumulatedMeansNotDivided(MicroBatchWindows):
    __doc__ = __doc__
    code = "KBW102"
    name = "accumulated-means-not-divided"
    entry = "grad-accumulation-scaling"
    title = "gradient accumulation adds up micro-batch mean losses never divided by the number of micro-batches"
    confidence = 0.8

    def reading(self, root):
        return root is not None and undivided_mean(root)

    def window_ended(self, optimizer, w):
        self.count(optimizer, w, all(w.readings) and w.micro_batches, len(w.readings))

    def findings(self) -> list:
        out = []
        for hits, windows, step, calls, line, site in self.reported(MIN_WINDOWS, MIN_SHARE):
            message = (f"on {hits} of {plural(windows, 'sampled step')} with several backward() calls, step() summed "
                       f"up to {calls} micro-batch losses from backward() at {line}, each a mean never divided by the "
                       f"number of micro-batches ({created_at('optimizer', site)}): step() "
                       f"applies {calls}x the batch's mean gradient (as if the learning rate were {calls}x, and "
                       f"clipping sees a {calls}x norm); divide each micro-batch loss by the number of micro-batches")
            out.append(self.finding(message, where=line, step=step,
                                    evidence={"windows": hits, "sampled_windows": windows, "micro_batches": calls}))
        return out
