"""KBW015: a regression loss whose prediction and target shapes broadcast into a grid.

Criterion: on a sampled call of mse_loss, l1_loss, smooth_l1_loss or huber_loss the input and
the target have different shapes whose broadcast holds more elements than either of them (an
(N, 1) prediction against an (N,) target, or the reverse, gives N x N pairs for N >= 2). The
loss then compares every prediction with every target of the batch; its minimiser is a constant
(the batch mean of the targets), so the model learns to ignore its input. Torch warns only once
per call site; a target that broadcasts along a dimension without creating new pairs, such as
an (N, D) prediction against a (1, D) or scalar target, is not reported. Evaluation calls (under
no_grad) count too, also on unsampled steps: there the loss reported, and any model picked by it,
is wrong even when training is right. The grid may also come made: one side (N, N) with N >= 2
and the other (N, 1) or (N,), a target built upstream from shapes that broadcast (a residual
y - pred of an (N,) label and an (N, 1) output), is reported the same way. A likelihood written
with torch.distributions (-Normal(mu, sigma).log_prob(y).mean()) is read the same way on sampled
steps: the value scored and the distribution's batch and event shape, when their ranks differ (an
(N,) mean against an (N, 1) target) and their broadcast holds more elements than either; grids
built on purpose give both sides the same rank (z.unsqueeze(1) against loc.unsqueeze(0)), and a
value scored against K components per row ((N, 1) against (N, K)) adds no pairs.
"""
from __future__ import annotations

import math

import torch

from kb_tools.watch.checks import Check, loss_where

KINDS = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss")


def _made_grid(square, column) -> bool:
    """`square` is (N, N) with N >= 2 and `column` is (N, 1) or (N,): an N x N grid made upstream."""
    return (len(square) == 2 and square[0] == square[1] >= 2
            and tuple(column) in ((square[0], 1), (square[0],)))


class RegressionLossBroadcasts(Check):
    __doc__ = __doc__
    code = "KBW015"
    name = "regression-loss-broadcasts"
    entry = "broadcasting-loss-shape"
    title = "regression loss on shapes that broadcast into an N x N grid, e.g. (N, 1) against (N,)"
    confidence = 0.95
    watches_evaluation = True  # an evaluation loss that broadcasts reports a wrong number

    def __init__(self, session):
        super().__init__(session)
        # (kind, where, site) -> [calls, first step, input shape, target shape, broadcast shape, calls with grad,
        # whether one side already was the N x N grid]
        self.sites: dict = {}

    def on_loss_input(self, call):
        if call.kind not in KINDS:
            return
        x, y = call.input, call.target
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or x.shape == y.shape:
            return
        try:
            grid = torch.broadcast_shapes(x.shape, y.shape)
        except RuntimeError:
            return  # torch raises on these shapes itself
        cells = 1
        for n in grid:
            cells *= n
        made = cells <= max(x.numel(), y.numel())
        if made and not (_made_grid(x.shape, y.shape) or _made_grid(y.shape, x.shape)):
            return
        key = (call.kind, loss_where(call), call.site)
        st = self.sites.get(key)
        if st is None:
            st = self.sites[key] = [0, self.session.step, tuple(x.shape), tuple(y.shape), tuple(grid), 0, made]
        st[0] += 1
        st[5] += bool(call.grad_enabled)

    def on_log_prob(self, distribution, value, result, site):
        shape = tuple(getattr(distribution, "batch_shape", ())) + tuple(getattr(distribution, "event_shape", ()))
        if value.dim() == len(shape) or value.dim() == 0 or not shape:
            return
        try:
            grid = torch.broadcast_shapes(value.shape, shape)
        except RuntimeError:
            return
        if math.prod(grid) <= max(value.numel(), math.prod(shape)):
            return
        name = type(distribution).__name__
        key = ("log_prob", f"{name}.log_prob called at {site}" if site else f"{name}.log_prob", site)
        st = self.sites.get(key)
        if st is None:
            if len(self.sites) >= 32:
                return
            st = self.sites[key] = [0, self.session.step, shape, tuple(value.shape), tuple(grid), 0, False]
        st[0] += 1
        st[5] += bool(result.requires_grad)

    def findings(self) -> list:
        out = []
        for (kind, where, site), (calls, step, xs, ys, grid, trained, made) in self.sites.items():
            effect = ("so the loss is minimised by a constant" if trained else
                      "under no_grad, as an evaluation runs: the loss it reports is not the model's error, and a "
                      "model or trial picked by it is not picked by its error")
            if kind == "log_prob":
                message = (f"{where.split(' called at ')[0]} scored values of shape {list(ys)} against a distribution "
                           f"of shape {list(xs)} on {calls} sampled call{'s' if calls != 1 else ''} from step {step} "
                           f"({where}): they broadcast to {list(grid)}, every row's distribution against every row's "
                           f"target, so the likelihood is best served by one distribution for the whole batch and the "
                           f"model learns to ignore its input; make the shapes equal (y.squeeze(-1) or "
                           f"mu.unsqueeze(-1))")
                out.append(self.finding(message, where=site, step=step, evidence={
                    "calls": calls, "distribution_shape": list(xs), "value_shape": list(ys),
                    "broadcast_shape": list(grid), "calls_with_grad": trained}))
                continue
            message = (f"{kind} compared a prediction of shape {list(xs)} with a target of shape {list(ys)} on "
                       f"{calls} sampled call{'s' if calls != 1 else ''} from step {step} ({where}): "
                       + (f"the {'target' if len(ys) == 2 and ys[0] == ys[1] else 'prediction'} already is a "
                          f"{grid[0]} x {grid[1]} grid, built upstream from shapes that broadcast (an (N,) tensor "
                          f"against an (N, 1) one): each prediction is fitted to a whole row of it, " if made else
                          f"they broadcast to {list(grid)}, every prediction against every target, ")
                       + f"{effect}; make the shapes equal (pred.squeeze(-1) or target.view(-1, 1))")
            out.append(self.finding(message, where=site, step=step, evidence={
                "calls": calls, "input_shape": list(xs), "target_shape": list(ys), "broadcast_shape": list(grid),
                "calls_with_grad": trained, "grid_made_upstream": made}))
        return out
