"""KBW021: sequence logits (N, T, C) passed to cross_entropy with T == C, so the time axis is read as the classes.

Criterion: on at least 2 sampled calls at one site, made with grad enabled, cross_entropy or
nll_loss receives a 3-D input (N, A, A) whose two trailing sizes are equal and a class-index
target of shape (N, A), and the input's last axis was made by a linear layer or matmul, or by a
log_softmax / softmax over the last dimension (its autograd history, followed through views,
additions and scalings, reaches such a node before any permute or transpose). torch takes dim
1 as the class axis; when the sequence length equals the number of classes the shapes check
out, no error is raised, and the loss scores the wrong axis.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, loss_where
from kb_tools.watch.checks.tensors import saved_dim

MIN_CALLS = 2
DEPTH = 6
_THROUGH = {"ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0", "AddBackward0", "SubBackward0",
            "MulBackward0", "DivBackward0", "CloneBackward0", "ToCopyBackward0", "ExpandBackward0"}
_MATMUL = {"AddmmBackward0", "MmBackward0", "BmmBackward0", "LinearBackward0", "MatmulBackward0"}
_SOFTMAX = {"LogSoftmaxBackward0", "SoftmaxBackward0"}


def last_axis_from_linear(t: torch.Tensor) -> bool:
    """Whether the last axis of `t` (3-D) was produced by a matmul or a softmax over the last dim."""
    node = t.grad_fn
    for _ in range(DEPTH):
        if node is None:
            return False
        name = type(node).__name__
        if name in _MATMUL:
            return True
        if name in _SOFTMAX:
            return saved_dim(node) in (-1, t.dim() - 1)
        if name not in _THROUGH:
            return False
        nxt = [f for f, _ in node.next_functions if f is not None and type(f).__name__ != "AccumulateGrad"]
        node = nxt[0] if nxt else None
    return False


class ClassAxisLast(Check):
    __doc__ = __doc__
    code = "KBW021"
    name = "class-axis-last"
    entry = "cross-entropy-target-form"
    title = "(N, T, C) logits into cross_entropy with T == C: the time axis is taken as the class axis"
    confidence = 0.95

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}  # (kind, where, site) -> [calls, first step, input shape]

    def on_loss_input(self, call):
        if call.kind not in ("cross_entropy", "nll_loss") or not call.grad_enabled:
            return
        x, y = call.input, call.target
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or x.dim() != 3 \
                or x.shape[1] != x.shape[2] or x.shape[1] < 2 or y.is_floating_point() \
                or tuple(y.shape) != (x.shape[0], x.shape[2]):
            return
        if not last_axis_from_linear(x):
            return
        key = (call.kind, loss_where(call), call.site)
        st = self.sites.get(key)
        if st is None:
            if len(self.sites) >= 32:
                return
            st = self.sites[key] = [0, self.session.step, tuple(x.shape)]
        st[0] += 1

    def findings(self) -> list:
        out = []
        for (kind, where, site), (calls, step, shape) in self.sites.items():
            if calls < MIN_CALLS:
                continue
            n, t, c = shape
            message = (f"{kind} got an input of shape {list(shape)} whose last axis holds the class scores (made "
                       f"by a linear layer or a softmax over it), with targets of shape [{n}, {t}], on {calls} "
                       f"sampled calls from step {step} ({where}): it reads dim 1 as the {c} classes, so with the "
                       f"sequence length equal to the class count it scores the wrong axis without an error; pass "
                       f"input.permute(0, 2, 1), or flatten the input to (N*T, C) and the target to (N*T,)")
            out.append(self.finding(message, where=site, step=step, evidence={"calls": calls, "input_shape": list(shape)}))
        return out
