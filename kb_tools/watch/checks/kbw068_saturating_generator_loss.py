"""KBW068: a generator trained on the saturating GAN loss, log(1 - D(G(z))), minimized.

Criterion: on sampled steps, a log of 1 - sigmoid(x) (`torch.log(1 - D(G(z)))`, with an added eps
or a clamp, a view between; or `log1p(-sigmoid(x))`), or a binary cross-entropy against all-zero
targets (`-bce(D(G(z)), zeros)`), whose result the backward pass pushes the way that raises
sigmoid(x): the gradient reaching the log is positive (the BCE's negative). That is the minimax
generator objective; the discriminator's own loss pushes the other way (a binary cross-entropy
never pushes log(1 - p) down) and is not counted, even at the same line or criterion. Found when
it held on at least MIN_CALLS sampled backward passes. The gradient it sends to each fake sample's
logit is -D(G(z)), so it vanishes as the discriminator wins; confidence is higher when D(G(z))
averaged at most WINNING on the last of them.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, loss_where
from kb_tools.watch.sites import user_site

MIN_CALLS = 3
WINNING = 0.1
MAX_SITES = 16
# autograd nodes that only add a constant, clamp or reshape on the way from the sigmoid to the log
_PASS = ("AddBackward0", "AddBackward1", "SubBackward1", "ClampBackward1", "ClampMinBackward0",
         "ViewBackward0", "ReshapeAliasBackward0", "UnsafeViewBackward0", "SqueezeBackward0",
         "SqueezeBackward1", "SqueezeBackward2", "UnsqueezeBackward0", "FlattenBackward0")


def _inputs(node) -> list:
    return [n for n, _ in node.next_functions if n is not None]


def _sigmoid_below(node, depth: int = 4):
    """The SigmoidBackward0 node reached from `node` through pass-through nodes only, or None."""
    for _ in range(depth):
        if node is None:
            return None
        if node.name() == "SigmoidBackward0":
            return node
        if node.name() not in _PASS:
            return None
        inputs = _inputs(node)
        if len(inputs) != 1:  # x + y of two tensors that both need grad: not a constant added
            return None
        node = inputs[0]
    return None


def complement_of_sigmoid(tensor, log1p: bool):
    """The sigmoid's result when `tensor` is 1 - sigmoid(x) (or -sigmoid(x) for log1p), else None."""
    node = tensor.grad_fn
    for _ in range(3):  # an eps added or a clamp after the subtraction
        if node is None or node.name() not in ("AddBackward0", "AddBackward1", "ClampBackward1", "ClampMinBackward0"):
            break
        inputs = _inputs(node)
        node = inputs[0] if len(inputs) == 1 else None
    if node is None:
        return None
    wanted = ("NegBackward0",) if log1p else ("RsubBackward1", "SubBackward0")
    if node.name() not in wanted:
        return None
    if node.name() == "SubBackward0":  # ones_like(d) - d: the first operand must need no gradient
        first, second = node.next_functions[0][0], node.next_functions[1][0]
        if first is not None or second is None:
            return None
        inputs = [second]
    else:
        inputs = _inputs(node)
    sigmoid = _sigmoid_below(inputs[0]) if len(inputs) == 1 else None
    return getattr(sigmoid, "_saved_result", None) if sigmoid is not None else None


class _Site:
    __slots__ = ("where", "label", "form", "compared", "matched", "first_step", "last_mean")

    def __init__(self, where: str | None, label: str, form: str):
        self.where, self.label, self.form = where, label, form
        self.compared = self.matched = 0
        self.first_step = None
        self.last_mean = None


class SaturatingGeneratorLoss(Check):
    __doc__ = __doc__
    code = "KBW068"
    name = "saturating-generator-loss"
    entry = "gan-discriminator-wins"
    title = "the generator minimizes log(1 - D(G(z))): its gradient vanishes as the discriminator wins"
    confidence = 0.45

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}

    def _watch(self, where: str | None, label: str, form: str, tensor, d_mean: float, sign: int) -> None:
        """Register a hook on `tensor`: when backward reaches it, count whether its gradient has `sign`."""
        key = (form, where)
        site = self.sites.get(key)
        if site is None:
            if len(self.sites) >= MAX_SITES:
                return
            site = self.sites[key] = _Site(where, label, form)
        step = self.session.step

        def seen(grad):
            total = float(grad.detach().sum())
            if total == 0:
                return
            site.compared += 1
            if (total > 0) == (sign > 0):
                site.matched += 1
                site.last_mean = d_mean
                if site.first_step is None:
                    site.first_step = step
        tensor.register_hook(seen)

    def on_log(self, name, source, output):
        if name not in ("log", "log1p"):
            return
        d = complement_of_sigmoid(source, log1p=(name == "log1p"))
        if d is None or d.numel() == 0:
            return
        where = user_site()
        d_mean = float(d.detach().float().mean())
        # minimized log(1 - D): the gradient reaching the log is positive
        self._watch(where, f"{name} called at {where}" if where else name,
                    "log(1 - D(G(z)))" if name == "log" else "log1p(-D(G(z)))", output, d_mean, +1)

    def on_loss(self, call):
        if call.kind not in ("binary_cross_entropy", "binary_cross_entropy_with_logits") or not call.grad_enabled:
            return
        x, y, out = call.input, call.target, call.output
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or not isinstance(out, torch.Tensor) \
                or not out.requires_grad or out.numel() != 1 or y.numel() == 0:
            return
        with torch.no_grad():
            if bool((y != 0).any()):
                return
            d = torch.sigmoid(x.float()) if call.kind.endswith("logits") else x.float()
            d_mean = float(d.mean())
        # -bce(D(G(z)), 0) minimized is log(1 - D) minimized: the gradient reaching the BCE is negative
        self._watch(call.site, loss_where(call), f"-{call.kind}(D(G(z)), zeros)", out, d_mean, -1)

    def findings(self) -> list:
        out = []
        for site in self.sites.values():
            if site.matched < MIN_CALLS or site.last_mean is None:
                continue
            winning = site.last_mean <= WINNING
            message = (f"a loss minimizes {site.form}, the saturating GAN generator loss, on {site.matched} "
                       f"sampled steps from step {site.first_step} ({site.label}); D(G(z)) averaged "
                       f"{site.last_mean:.3g} on the last. Its gradient on each fake's logit is -D(G(z)), "
                       f"so it vanishes as the discriminator wins"
                       + (", as it does here" if winning else "")
                       + ": maximize log D(G(z)) instead (BCE against the real label on the fakes)")
            out.append(self.finding(message, step=site.first_step, where=site.where,
                                    confidence=0.65 if winning else self.confidence,
                                    evidence={"form": site.form, "steps_matched": site.matched,
                                              "steps_compared": site.compared,
                                              "d_of_fakes_mean": round(site.last_mean, 4)}))
        return out
