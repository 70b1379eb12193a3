"""KBW085: a loss term built from torch.autograd.grad without create_graph=True, added to the loss
(loss-detached-from-graph).

Criterion: on at least 3 sampled steps, torch.autograd.grad ran with grad enabled and without
create_graph on outputs whose graph reaches an nn.Parameter (forces from a model's energy, a PDE
residual's derivatives, a gradient penalty), a loss function of the same step then received, as
its input or its target, a tensor proportional to one of those results (the same shape and the
same absolute values up to one factor: -grad, or a unit conversion of it) while neither of its
arguments required grad, and the tensor given to backward() adds a term that carries no gradient.
Without create_graph the gradient is a constant to autograd: the loss term built on it is a number
added to the loss, its own gradient is zero, and that part of the objective (the forces, the
physics residual) never trains.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, loss_where
from kb_tools.watch.checks.tensors import adds_a_constant, graph_leaves, graph_nodes

MIN_STEPS = 3
SAMPLES = 16
MAX_RESULTS = 8
MAX_NODES = 50_000
MAX_LEAVES = 4096


def shape_of_values(t) -> tuple | None:
    """(shape, strided absolute values divided by their sum): equal for x, -x and c * x."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() < 2:
        return None
    flat = t.detach().reshape(-1).abs().double()
    total = float(flat.sum())
    if not total or total != total:
        return None
    stride = max(1, flat.numel() // SAMPLES)
    return tuple(t.shape), tuple(round(float(v) / total, 9) for v in flat[::stride][:SAMPLES])


def _reaches_parameters(outputs) -> bool:
    """Does the graph of `outputs` reach an nn.Parameter (a model made them)?"""
    leaves = graph_leaves([o for o in outputs if isinstance(o, torch.Tensor)], MAX_LEAVES, MAX_NODES)
    return any(isinstance(t, torch.nn.Parameter) for t in leaves)


class GradientTermWithoutCreateGraph(Check):
    __doc__ = __doc__
    code = "KBW085"
    name = "gradient-term-without-create-graph"
    entry = "loss-detached-from-graph"
    title = "a loss term built from torch.autograd.grad without create_graph=True: it trains nothing"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.step = None
        self.results: dict = {}     # value shapes of this step's autograd.grad results -> the call's site
        self.matched = None         # (loss info, autograd.grad site) of this step's matching loss call
        self.steps = 0
        self.first = None           # (step, loss info, autograd.grad site)

    def _this_step(self) -> None:
        if self.step != self.session.step:
            self.step, self.results, self.matched = self.session.step, {}, None

    def on_plain_autograd_grad(self, outputs, results, site):
        self._this_step()
        if not _reaches_parameters(outputs):  # reference forces made from the data, not from the model
            return
        for t in results:
            if len(self.results) < MAX_RESULTS:
                fp = shape_of_values(t)
                if fp is not None:
                    self.results.setdefault(fp, site)

    def on_loss_input(self, call):
        self._this_step()
        if not self.results or self.matched is not None or not call.grad_enabled:
            return
        args = [a for a in (call.input, call.target) if isinstance(a, torch.Tensor)]
        if not args or any(a.requires_grad for a in args):
            return
        for a in args:
            fp = shape_of_values(a)
            if fp in self.results:
                self.matched = (call.info, self.results[fp])
                return

    def on_before_backward(self, tensors):
        self._this_step()
        if self.matched is None or not any(adds_a_constant(node) for node in graph_nodes(tensors, MAX_NODES)):
            return
        self.steps += 1
        if self.first is None:
            self.first = (self.session.step, *self.matched)
        self.matched = None

    def findings(self) -> list:
        if self.steps < MIN_STEPS or self.first is None:
            return []
        step, info, site = self.first
        return [self.finding(
            f"on {self.steps} sampled steps from step {step}, {loss_where(info)} scored a gradient that "
            f"torch.autograd.grad{f' at {site}' if site else ''} returned without create_graph=True, and that "
            f"term was added to the loss with no gradient of its own: it is a constant to autograd, so that "
            f"part of the objective never trains; pass create_graph=True (and keep the inputs requiring grad)",
            where=site, step=step, evidence={"steps": self.steps, "loss": info.kind, "autograd_grad": site})]
