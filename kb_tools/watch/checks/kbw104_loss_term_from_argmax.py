"""KBW104: a loss term made from the argmax (or argmin) of predictions that carry a graph, added to the
loss: indices carry no gradient, so the term is a constant that trains nothing while it shows in the loss.

Criterion: on at least 3 sampled steps, torch.argmax or torch.argmin, or torch.max or torch.min along a
dim (their indices; `_, pred = torch.max(out, 1)`), or the Tensor methods, called
from the user's code with grad enabled after a forward of a watched model with grad since the last
backward(), took indices from a tensor with a graph, and at the next backward() the tensor backward()
ran on was made from them: the indices, or a tensor made from them (a comparison, a lookup into a
tensor that needs no grad, a cast, a power), entered it by an add or subtract with a tensor that
carries gradient, or a stack or cat with one, followed by nothing but sums, means, further adds,
reshapes and products with a factor that carries no gradient (KBW091's trace, from the indices
instead of a copy). Indices that select values with a graph (gather, indexing such a tensor), that
weigh a term with a graph (a mask, a reward times a log-probability), or that are a loss function's
target (pseudo-labels) shape another term's gradient and are passed over, as are indices only logged
(an accuracy) or used after backward().
"""
from __future__ import annotations

from kb_tools.watch.checks import plural
from kb_tools.watch.checks.kbw091_loss_term_copied_by_tensor import LossTermCopiedByTensor


class LossTermFromArgmax(LossTermCopiedByTensor):
    __doc__ = __doc__
    code = "KBW104"
    name = "loss-term-from-argmax"
    entry = "loss-detached-from-graph"
    title = "a loss term built from argmax/argmin of the predictions is added to the loss: it trains nothing"
    confidence = 0.8
    functions = ("argmax", "argmin", "max", "min")

    def _untrained(self, tensors, pending: dict) -> set:
        """Every term made from indices: they have no gradient whatever else the graph trains."""
        return set(pending)

    def _describe(self) -> tuple[str, dict]:
        listed = "; ".join(f"{name}() at {site}" + (f", added to the loss at {where}" if where else "")
                           + f" ({plural(k, 'sampled step')})"
                           for site, (name, _, _, where, k) in self.sites.items())
        message = (f"on {plural(self.steps, 'sampled step')} a term built from the indices of an argmax, argmin, max "
                   f"or min of tensors that carry gradient was added to the loss backward() ran on: {listed}; indices have "
                   f"no gradient, so that term is a constant: it shows in the loss and trains nothing; build it "
                   f"from probabilities (a softmax, an expected value) or leave it out of the loss")
        evidence = {"steps": self.steps, "first_step": self.first_step,
                    "indices": [{"function": f"torch.{name}", "site": site, "shapes": shapes, "added_at": where,
                                 "sampled_steps": k}
                                for site, (name, _, shapes, where, k) in self.sites.items()]}
        return message, evidence

