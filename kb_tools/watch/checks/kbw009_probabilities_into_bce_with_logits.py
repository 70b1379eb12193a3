"""KBW009: binary_cross_entropy_with_logits receives probabilities (a sigmoid already applied).

Criterion: at one loss site, on at least 2 sampled calls and on every sampled call, every input
value lies in [0, 1] and at least half lie strictly inside (0, 1), over at least 32
values in all, and, when the input has autograd history, a sigmoid or softmax is among the last
4 operations that made it (following each operation's first non-parameter input; operations that
only select or rearrange values, such as indexing, gather and view, are passed through uncounted): the small
logits of an untrained network (a GAN's discriminator) can all lie in [0, 1], the output of a
sigmoid always does. The loss applies its own sigmoid, so the probability it scores stays in
(0.5, 0.73) and the loss has a floor near 0.5.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, loss_where

MIN_CALLS = 2
MIN_VALUES = 32
GRAPH_DEPTH = 4
SQUASHING = ("Sigmoid", "Softmax")
SELECTING = ("Select", "Slice", "Index", "Gather", "View", "Unsafe", "Reshape", "Squeeze", "Unsqueeze",
             "Transpose", "Permute", "Expand", "Cat", "Stack", "Clone", "MaskedSelect", "Split", "Unbind")
MAX_NODES = 16  # operations followed back in all, selections included


def _made_by_squashing(x) -> bool:
    """Whether one of the last GRAPH_DEPTH operations behind `x` is a sigmoid or softmax, not
    counting operations that only select or rearrange values (indexing, gather, view, cat: a
    sigmoid's outputs picked per question are still probabilities); True when `x` has no autograd
    history (under no_grad the values alone decide)."""
    node = x.grad_fn
    if node is None:
        return True
    counted = 0
    for _ in range(MAX_NODES):
        name = type(node).__name__
        if any(k in name for k in SQUASHING):
            return True
        if not name.startswith(SELECTING):
            counted += 1
            if counted >= GRAPH_DEPTH:
                return False
        node = next((fn for fn, _ in node.next_functions
                     if fn is not None and type(fn).__name__ != "AccumulateGrad"), None)
        if node is None:
            return False
    return False


class ProbabilitiesIntoBceWithLogits(Check):
    __doc__ = __doc__
    code = "KBW009"
    name = "probabilities-into-bce-with-logits"
    entry = "double-sigmoid"
    title = "BCEWithLogits inputs all in [0, 1]: a sigmoid before a loss that applies its own"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}  # site -> [calls, hits, values, first step, smallest, largest]

    def on_loss(self, call):
        if call.kind != "binary_cross_entropy_with_logits":
            return
        x = call.input
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
            return
        squashed = _made_by_squashing(x)
        x = x.detach().float()
        st = self.sites.setdefault((loss_where(call), call.site), [0, 0, 0, None, 1.0, 0.0])
        st[0] += 1
        low, high = float(x.min()), float(x.max())
        inside = float(((x > 0) & (x < 1)).float().mean())
        if low >= 0 and high <= 1 and inside >= 0.5 and squashed:
            st[1] += 1
            st[2] += x.numel()
            st[4], st[5] = min(st[4], low), max(st[5], high)
            if st[3] is None:
                st[3] = self.session.step

    def findings(self) -> list:
        out = []
        for (where, site), (calls, hits, values, step, low, high) in self.sites.items():
            if hits < MIN_CALLS or hits < calls or values < MIN_VALUES:
                continue
            message = (f"binary_cross_entropy_with_logits got probabilities, not logits: on {hits} of {hits} sampled "
                       f"calls all of its inputs were in [0, 1] ({where}); it applies a sigmoid "
                       f"itself, so the probability it scores stays in (0.5, 0.73) and the loss cannot go much below "
                       f"0.5: drop the sigmoid from the model's output")
            out.append(self.finding(message, where=site, step=step, evidence={
                "calls": hits, "values": values, "min": low, "max": high}))
        return out
