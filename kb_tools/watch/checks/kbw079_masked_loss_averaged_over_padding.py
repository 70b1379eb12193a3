"""KBW079: a masked loss whose average still counts the masked-out positions.

Criterion: on sampled steps, the loss given to backward() holds, within 12 autograd nodes of it,
one of two shapes, each with a padding mask: constant, 0/1 (or bool), with zeros, over positions
along a dimension after the batch's, every row ones then zeros or zeros then ones.
  - A mean over every element (`.mean()`, or `.sum()` divided by the element count) of a loss
    times the mask (`(loss * mask).mean()`, `torch.where(mask, loss, 0).mean()`,
    `loss.masked_fill(~mask, 0).mean()`), not divided afterwards by the mask's own mean, on at
    least 3 sampled steps, with the mask's share of ones below 0.95 on average and moving by
    0.05 or more between steps (so the loss's scale follows the padding of each batch).
  - A loss already reduced to one number (reduction 'mean' or 'sum', or a full .mean()/.sum())
    multiplied by the mask, on at least 3 sampled steps: the mask then multiplies copies of one
    number and masks nothing.
Either way the padded positions are in the denominator (or in the loss) and the gradient on the
real ones shrinks with the padding. `(loss * mask).sum() / mask.sum()`, `loss[mask].mean()` and
a mean divided by `mask.mean()` are the right forms and are not matched.
"""
from __future__ import annotations

from typing import Any

import torch

from kb_tools.watch.checks import Check
from kb_tools.watch.checks.tensors import constant_factor, skip_view_nodes
from kb_tools.watch.sites import user_site

MAX_DEPTH = 12
MAX_NODES = 400
MIN_STEPS = 3
MAX_SHARE = 0.95
MIN_SPREAD = 0.05
FULL_REDUCTIONS = frozenset({"MeanBackward0", "SumBackward0"})


def _masking(node):
    """(the 0/1 mask as a tensor whose ones are the positions kept, the masked branch's node) for a
    Mul / Where / MaskedFill node that applies a constant mask; else None."""
    name = node.name()
    nexts = node.next_functions
    if name == "MulBackward0" and len(nexts) == 2 and (nexts[0][0] is None) != (nexts[1][0] is None):
        constant_is_other = nexts[1][0] is None
        mask = node._saved_other if constant_is_other else node._saved_self
        branch = nexts[0][0] if constant_is_other else nexts[1][0]
    elif name == "WhereBackward0" and len(nexts) == 2 and (nexts[0][0] is None) != (nexts[1][0] is None):
        condition = node._saved_condition
        mask, branch = (condition, nexts[0][0]) if nexts[1][0] is None else (~condition, nexts[1][0])
    elif name == "MaskedFillBackward0" and nexts:
        mask, branch = ~node._saved_mask, nexts[0][0]
    else:
        return None
    if not isinstance(mask, torch.Tensor) or mask.numel() < 2 or branch is None:
        return None
    return mask, branch


def _share_of_ones(mask) -> float | None:
    """The share of ones of a padding mask: 0/1 (or bool), with zeros and ones, over positions
    (a dimension after the batch's) where every row is ones then zeros, or zeros then ones. A
    mask over samples (FixMatch's confident pseudo-labels, whose mean over the whole batch is the
    method's own definition) or a scattered one is not padding: None."""
    if mask.dtype != torch.bool:
        if mask.is_complex() or not bool(((mask == 0) | (mask == 1)).all()):
            return None
    positions = mask.squeeze()
    if positions.dim() < 2 or positions.shape[1] < 2:
        return None
    rows = positions.movedim(1, -1).reshape(-1, positions.shape[1]).to(torch.int8)
    steps = rows[:, 1:] - rows[:, :-1]
    if not (bool((steps <= 0).all()) or bool((steps >= 0).all())):
        return None
    share = float(mask.float().mean())
    return share if 0.0 < share < 1.0 else None


def _is_reduced(node) -> bool:
    """Is this node's output one number: a full mean/sum, or a loss with reduction mean or sum?"""
    if node.name() in FULL_REDUCTIONS:
        return True
    reduction = getattr(node, "_saved_reduction", None)
    return reduction in (1, 2)


def _numel(node) -> int | None:
    try:
        return int(torch.Size(node._input_metadata[0].shape).numel())
    except (AttributeError, IndexError, RuntimeError, TypeError):
        return None


def _corrected(share: float, factors: tuple) -> bool:
    """Was the mean divided by the mask's mean on the way to the loss (a right form)?"""
    for kind, value in factors:
        if kind == "div" and abs(value - share) <= 1e-3 * max(1.0, share):
            return True
        if kind == "mul" and abs(value * share - 1.0) <= 1e-3:
            return True
    return False


def find_masked_means(root) -> tuple[list, bool]:
    """Walk the graph of `root` (near the loss): the mask shares of every `mean(loss * mask)` not
    corrected by the mask's mean, and whether a mask multiplies an already reduced loss."""
    shares, on_reduced = [], False
    stack: list[tuple[Any, int, tuple]] = [(root, 0, ())]
    seen: dict = {}   # id -> node, held until the walk ends so that no id is reused (see nodes_from)
    while stack and len(seen) < MAX_NODES:
        node, depth, factors = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        name = node.name()
        try:
            masking = _masking(node)
        except RuntimeError:  # a saved tensor already freed
            masking = None
        if masking is not None:
            mask, branch = masking
            if _is_reduced(skip_view_nodes(branch)) and _share_of_ones(mask) is not None:
                on_reduced = True
        if name in ("MeanBackward0", "SumBackward0") and node.next_functions:
            inner = skip_view_nodes(node.next_functions[0][0])
            try:
                masked = _masking(inner) if inner is not None else None
            except RuntimeError:
                masked = None
            if masked is not None and not _is_reduced(skip_view_nodes(masked[1])):
                count = _numel(inner)
                divided_by_count = any(kind == "div" and count and abs(value - count) < 0.5 for kind, value in factors)
                if name == "MeanBackward0" or divided_by_count:
                    share = _share_of_ones(masked[0])
                    if share is not None and not _corrected(share, factors):
                        shares.append(share)
        if depth >= MAX_DEPTH:
            continue
        factor = constant_factor(node)
        inner_factors = factors + (factor,) if factor is not None else factors
        for child, _ in node.next_functions:
            if child is not None:
                stack.append((child, depth + 1, inner_factors))
    return shares, on_reduced


class MaskedLossAveragedOverPadding(Check):
    __doc__ = __doc__
    code = "KBW079"
    name = "masked-loss-averaged-over-padding"
    entry = "padded-loss-reduction"
    title = "a masked loss is averaged over every position, or the mask multiplies a loss already reduced"
    confidence = 0.75

    def __init__(self, session):
        super().__init__(session)
        self.mean_steps = 0
        self.share_sum, self.share_min, self.share_max = 0.0, 1.0, 0.0
        self.first_mean_step = None
        self.reduced_steps = 0
        self.first_reduced_step = None
        self._last_step = None
        self.site = None

    def on_before_backward(self, tensors):
        s = self.session
        if self._last_step == s.step or not tensors:
            return
        loss = tensors[0]
        if not isinstance(loss, torch.Tensor) or loss.grad_fn is None or loss.numel() != 1:
            return
        self._last_step = s.step
        shares, on_reduced = find_masked_means(loss.grad_fn)
        if (shares or on_reduced) and self.site is None:
            self.site = user_site()
        if shares:
            share = min(shares)
            self.mean_steps += 1
            self.share_sum += share
            self.share_min, self.share_max = min(self.share_min, share), max(self.share_max, share)
            if self.first_mean_step is None:
                self.first_mean_step = s.step
        if on_reduced:
            self.reduced_steps += 1
            if self.first_reduced_step is None:
                self.first_reduced_step = s.step

    def _at(self) -> str:
        return f" at {self.site}" if self.site else ""

    def findings(self) -> list:
        found = []
        if self.reduced_steps >= MIN_STEPS:
            found.append(self.finding(
                f"on {self.reduced_steps} sampled steps from step {self.first_reduced_step}, in the loss given to "
                f"backward(){self._at()}, a 0/1 mask multiplied a "
                f"loss that was already reduced to one number (reduction 'mean' or 'sum', or a full mean/sum), so "
                f"the mask masks nothing and the padded positions are trained on as real ones; build the loss with "
                f"reduction='none', then (loss * mask).sum() / mask.sum()",
                where=self.site, step=self.first_reduced_step, evidence={"steps": self.reduced_steps}))
        if self.mean_steps >= MIN_STEPS:
            mean_share = self.share_sum / self.mean_steps
            if mean_share < MAX_SHARE and self.share_max - self.share_min >= MIN_SPREAD:
                found.append(self.finding(
                    f"on {self.mean_steps} sampled steps from step {self.first_mean_step}, the loss given to backward()"
                    f"{self._at()} was a mean over "
                    f"every position of a loss times a 0/1 mask: the mask kept {self.share_min:.0%}-"
                    f"{self.share_max:.0%} of the positions, so the masked-out ones still count in the denominator "
                    f"and the loss (and its gradient) shrinks with the padding of each batch; divide the masked sum "
                    f"by the mask's sum: (loss * mask).sum() / mask.sum()",
                    where=self.site, step=self.first_mean_step, evidence={
                        "steps": self.mean_steps, "share_min": round(self.share_min, 4),
                        "share_max": round(self.share_max, 4), "share_mean": round(mean_share, 4)}))
        return found
