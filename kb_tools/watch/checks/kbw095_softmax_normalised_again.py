"""KBW095: the output of a softmax is normalised again as if it were logits, by log_softmax or by a
log-sum-exp written by hand (a policy's `logits - logits.logsumexp(-1)`, Categorical(logits=...)).

Criterion: on sampled steps, torch.log_softmax / Tensor.log_softmax (F.log_softmax and
nn.LogSoftmax call it) or torch.logsumexp / Tensor.logsumexp returns a result that requires grad,
and its input was made by a softmax: its autograd node is SoftmaxBackward0, reached through
view-like nodes only (tensors.VIEW_NODES: view, reshape, squeeze, select, transpose, expand, clone,
a dtype cast). One call site seen on at least MIN_STEPS sampled steps. Probabilities in [0, 1] read as
logits give a distribution close to uniform whatever the model says, and a gradient squeezed by
both softmaxes: the loss stalls near log(classes). log() of a softmax output is the right way to get
log-probabilities and is not counted.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, plural
from kb_tools.watch.checks.tensors import skip_view_nodes
from kb_tools.watch.sites import user_site

MIN_STEPS = 2
MAX_SITES = 16


def made_by_softmax(tensor) -> bool:
    """Whether `tensor` is a softmax's output, possibly reshaped (tensors.VIEW_NODES in between)."""
    node = skip_view_nodes(getattr(tensor, "grad_fn", None))
    return node is not None and node.name().startswith("SoftmaxBackward")


class SoftmaxNormalisedAgain(Check):
    __doc__ = __doc__
    code = "KBW095"
    name = "softmax-normalised-again"
    entry = "double-softmax"
    title = "a softmax output normalised again by log_softmax or logsumexp, as if it were logits"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}  # (function, file:line) -> [sampled steps seen, last of them, first]

    def on_log(self, name, source, output):
        if name not in ("log_softmax", "logsumexp") or not made_by_softmax(source):
            return
        key = (name, user_site())
        st = self.sites.get(key)
        if st is None:
            if len(self.sites) >= MAX_SITES:
                return
            st = self.sites[key] = [0, None, self.session.step]
        if st[1] != self.session.step:
            st[0] += 1
            st[1] = self.session.step

    def findings(self) -> list:
        out = []
        for (name, site), (steps, _, first) in self.sites.items():
            if steps < MIN_STEPS:
                continue
            where = f" at {site}" if site else ""
            message = (f"{name}{where} normalised the output of a softmax again, on {plural(steps, 'sampled step')} "
                       f"from step {first}: probabilities read as logits give a distribution close to uniform "
                       f"whatever the model says, and the loss stalls near log(classes); pass the logits (drop the "
                       f"softmax before it), or take torch.log of the probabilities")
            out.append(self.finding(message, where=site, step=first,
                                    evidence={"function": name, "call": site, "sampled_steps": steps}))
        return out
