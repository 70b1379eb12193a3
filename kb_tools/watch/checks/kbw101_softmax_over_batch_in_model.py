"""KBW101: a softmax or log_softmax on the way to the loss normalises over the batch axis, inside the
model or the loss code (KBW037 reads only the tensor handed to cross_entropy / nll_loss).

Criterion: on each of the first MAX_WALKS sampled backward() calls, the loss's autograd graph is
walked (at most MAX_NODES nodes) for SoftmaxBackward0 / LogSoftmaxBackward0 nodes; such a node
counts when the axis it normalised has the batch's size N and no other axis of its result has a
multiple of it (the batch is not flattened into another axis: (N*T, V) logits with V == N are not).
N is the batch_size of the DataLoader that fed the step when one did (a sequence-first layout
(T, N, ...) keeps its time axis apart), else the first dimension of the watched model's input;
N >= 4, or N = 1 with a 2-D result normalised over dim 0 and at least 2 values on its other axis
(one sample's (1, actions) scores taken with dim=0: every probability is 1, every gradient 0).
When a loss function was called on the step, its input's first dimension must be a multiple of N
(a multiple-instance model whose bag is the batch, scored once per bag, is not judged). Reported
when such a node is in the graph of at least MIN_HITS walked backward() calls and of at least
MIN_SHARE of them. A (N, N) similarity matrix (contrastive losses) is left alone: two axes of size N.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, plural
from kb_tools.watch.checks.tensors import first_tensor, nodes_from, saved_dim

MAX_WALKS = 12
MAX_NODES = 5000
MIN_HITS = 2
MIN_SHARE = 0.75
MIN_BATCH = 4
NODES = ("SoftmaxBackward0", "LogSoftmaxBackward0")


def batch_axis_softmax(node, batch: int):
    """(name, axis, shape) when this autograd node is a softmax over the batch axis, else None."""
    name = node.name()
    if name not in NODES:
        return None
    result = getattr(node, "_saved_result", None)
    if not isinstance(result, torch.Tensor) or result.dim() < 2:
        return None
    shape = tuple(result.shape)
    dim = saved_dim(node)
    if dim is None:
        return None
    axis = dim % len(shape)
    if shape[axis] != batch or shape.count(batch) != 1:
        return None
    if batch == 1 and not (len(shape) == 2 and axis == 0 and shape[1] >= 2):
        return None
    if batch != 1 and (batch < MIN_BATCH or any(n % batch == 0 for i, n in enumerate(shape) if i != axis)):
        return None   # another axis carries the batch, flattened in ((N*T, V) logits with V == N)
    return name, axis, shape


class SoftmaxOverBatchInModel(Check):
    __doc__ = __doc__
    code = "KBW101"
    name = "softmax-over-batch-in-model"
    entry = "softmax-wrong-dim"
    title = "a softmax on the way to the loss normalises over the batch axis (inside the model or the loss code)"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.walks = self.hits = 0
        self.loader_batch = None     # (step, batch_size) of the DataLoader that fed the latest batch
        self.input_batch = None      # first dimension of the watched model's latest grad-enabled input
        self.loss_rows = None        # (step, first dimension of the latest loss function's input)
        self.example = None          # (name, axis, shape, batch, step) of the first hit

    def on_any_batch(self, loader, batch, serial):
        size = getattr(loader, "batch_size", None)
        self.loader_batch = (self.session.step, size) if isinstance(size, int) else None

    def on_root_input(self, model, args, grad_enabled):
        if grad_enabled and self.walks < MAX_WALKS:
            x = first_tensor(args)
            self.input_batch = int(x.shape[0]) if isinstance(x, torch.Tensor) and x.dim() >= 1 else None

    def on_loss(self, call):
        if self.walks >= MAX_WALKS:
            return
        x = call.input
        if isinstance(x, torch.Tensor) and x.dim() >= 1 and x.requires_grad:
            self.loss_rows = (self.session.step, int(x.shape[0]))

    def _batch(self):
        step = self.session.step
        if self.loader_batch is not None and self.loader_batch[0] == step:
            return self.loader_batch[1]
        return self.input_batch

    def on_before_backward(self, tensors):
        if self.walks >= MAX_WALKS or not tensors:
            return
        fn = getattr(tensors[0], "grad_fn", None)
        batch = self._batch()
        if fn is None or not batch:
            return
        if self.loss_rows is not None and self.loss_rows[0] == self.session.step \
                and self.loss_rows[1] % batch != 0:
            return
        self.walks += 1
        for node in nodes_from([fn], MAX_NODES):
            found = batch_axis_softmax(node, batch)
            if found is not None:
                self.hits += 1
                if self.example is None:
                    self.example = (*found, batch, self.session.step)
                return

    def findings(self) -> list:
        if self.hits < MIN_HITS or self.hits < MIN_SHARE * self.walks:
            return []
        name, axis, shape, batch, step = self.example
        op = "log_softmax" if name.startswith("Log") else "softmax"
        what = ("a batch of one sample was normalised over dim 0: every probability is 1 and no gradient "
                "flows back through it" if batch == 1 else
                f"each value is divided by a sum over the {batch} samples of the batch, so every prediction "
                f"depends on the other samples and a sample scored alone gets a different answer")
        message = (f"a {op} over dim {axis} of a {tuple(shape)} tensor reached the loss on {self.hits} of "
                   f"{plural(self.walks, 'sampled backward() call')}; dim {axis} is the batch ({batch}): {what}; "
                   f"normalise over the class or key axis (dim=-1 for (N, C))")
        return [self.finding(message, step=step, evidence={"op": op, "dim": axis, "shape": list(shape),
                                                           "batch": batch, "hits": self.hits, "walks": self.walks})]
