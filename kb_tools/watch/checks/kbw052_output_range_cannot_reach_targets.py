"""KBW052: a regression output squashed by sigmoid, tanh or ReLU while the targets lie outside that range.

Criterion: at one loss site, on at least 2 sampled calls of mse_loss, l1_loss, smooth_l1_loss or
huber_loss, the prediction comes straight from a sigmoid, tanh or ReLU (its autograd node, past
views, reshapes and squeezes) and at least 10% of the target values lie outside that activation's
range ((0, 1), (-1, 1), [0, inf)) by more than 1e-6. Those targets can never be reached: the loss
has a floor, and the prediction piles up at the range's edge where the gradient vanishes.
Targets inside the range (pixels in [0, 1] under a sigmoid, counts under a ReLU) are not reported.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, loss_where
from kb_tools.watch.checks.tensors import skip_view_nodes

MIN_CALLS = 2
SHARE = 0.1
SLACK = 1e-6
REGRESSION = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss")
RANGES = {"SigmoidBackward0": ("sigmoid", 0.0, 1.0), "TanhBackward0": ("tanh", -1.0, 1.0),
          "ReluBackward0": ("relu", 0.0, None)}


def _squashing(tensor):
    """The bounded activation that made `tensor`, looking through view-like autograd nodes."""
    node = skip_view_nodes(tensor.grad_fn)
    return RANGES.get(node.name()) if node is not None else None


class OutputRangeCannotReachTargets(Check):
    __doc__ = __doc__
    code = "KBW052"
    name = "output-range-cannot-reach-targets"
    entry = "output-activation-range"
    title = "regression outputs from sigmoid/tanh/ReLU while many targets lie outside that range"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}  # (where, site, kind) -> [hits, first step, activation, share, lowest, highest]

    def on_loss_input(self, call):
        if call.kind not in REGRESSION:
            return
        x, y = call.input, call.target
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or not y.is_floating_point() \
                or y.numel() == 0:
            return
        found = _squashing(x)
        if found is None:
            return
        activation, low, high = found
        y = y.detach().float()
        outside = y < low - SLACK
        if high is not None:
            outside |= y > high + SLACK
        share = float(outside.float().mean())
        if share < SHARE:
            return
        st = self.sites.setdefault((loss_where(call), call.site, call.kind),
                                   [0, self.session.step, activation, 0.0, float("inf"), float("-inf")])
        st[0] += 1
        st[3] = max(st[3], share)
        st[4], st[5] = min(st[4], float(y.min())), max(st[5], float(y.max()))

    def findings(self) -> list:
        out = []
        for (where, site, kind), (hits, step, activation, share, low, high) in self.sites.items():
            if hits < MIN_CALLS:
                continue
            span = {"sigmoid": "(0, 1)", "tanh": "(-1, 1)", "relu": "[0, inf)"}[activation]
            message = (f"{kind} compared predictions that come straight from a {activation}, range {span}, with "
                       f"targets from {low:.3g} to {high:.3g}, up to {share:.0%} of them out of reach, on {hits} "
                       f"sampled calls from step {step} ({where}): the loss has a floor it cannot go below; drop the "
                       f"output activation (a linear output) or rescale the targets into its range")
            out.append(self.finding(message, where=site, step=step, evidence={
                "calls": hits, "activation": activation, "targets_out_of_range": share, "min_target": low,
                "max_target": high}))
        return out
