"""KBW004: backward() runs on a loss that has no autograd history, so no gradient reaches the model.

Criterion: backward() is called on a tensor without grad_fn, either
- one that does not require grad (torch then raises "element 0 of tensors does not require grad"):
  the forward ran under torch.no_grad() / inference_mode, or the loss was rebuilt from a number;
  one such call is enough; or
- a leaf that requires grad, such as torch.tensor(loss.item(), requires_grad=True), on at least
  2 sampled steps, after which no parameter of any optimizer had a gradient (every .grad None or
  unchanged by that backward()).
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, created_at, loss_where, plural

MIN_LEAF = 2


class LossWithoutGraph(Check):
    __doc__ = __doc__
    code = "KBW004"
    name = "loss-without-graph"
    entry = "loss-detached-from-graph"
    title = "backward() on a loss with no grad_fn: computed under no_grad, or rebuilt from a number"
    confidence = 0.95

    def __init__(self, session):
        super().__init__(session)
        self.no_grad_calls = 0
        self.no_grad_step = None
        self.no_grad_loss = None          # (site, grad_enabled) of the loss computed last
        self.leaf_calls = 0
        self.leaf_no_gradient = 0
        self.leaf_step = None
        self.before: dict | None = None   # grad norms of the optimizers before a leaf backward()

    def on_before_backward(self, tensors):
        if not tensors or tensors[0].grad_fn is not None:
            self.before = None
            return
        loss = tensors[0]
        if not loss.requires_grad:
            self.no_grad_calls += 1
            if self.no_grad_step is None:
                self.no_grad_step = self.session.step
                last = self.session.last_loss
                self.no_grad_loss = (last.site, last.grad_enabled, loss_where(last)) if last is not None else None
            self.before = None
            return
        self.leaf_calls += 1
        self.before = {id(opt): self.session.grad_norm(opt) for opt in self.session.live_optimizers()}

    def on_after_backward(self, tensors):
        if self.before is None:
            return
        opts = self.session.live_optimizers()
        reached = any(self.session.grad_norm(opt) != self.before.get(id(opt)) for opt in opts)
        if opts and not reached:
            self.leaf_no_gradient += 1
            if self.leaf_step is None:
                self.leaf_step = self.session.step
        self.before = None

    def findings(self) -> list:
        s = self.session
        out = []
        if self.no_grad_calls:
            if self.no_grad_loss is not None:
                site, grad_enabled, where = self.no_grad_loss
                how = (f"; the last loss ({where}) was computed with grad mode "
                       f"{'on' if grad_enabled else 'off (torch.no_grad / inference_mode)'}")
            else:
                site, how = None, ""
            message = (f"backward() was called on a loss that has no grad_fn and does not require grad, at step "
                       f"{self.no_grad_step}{how}: the forward pass ran without autograd, or the loss was "
                       f"rebuilt from a number")
            out.append(self.finding(message, where=site, step=self.no_grad_step, evidence={
                "calls": self.no_grad_calls, "first_step": self.no_grad_step,
                "loss_site": site, "loss_grad_enabled": self.no_grad_loss[1] if self.no_grad_loss else None}))
        if self.leaf_no_gradient >= MIN_LEAF:
            message = (f"backward() ran on a leaf tensor with requires_grad=True and no grad_fn on "
                       f"{self.leaf_no_gradient} of {plural(self.leaf_calls, 'sampled call')}, and no parameter "
                       f"got a gradient from it ({created_at('optimizer', s.where())}): the loss was rebuilt "
                       f"from a number (torch.tensor(loss.item(), requires_grad=True) or similar), which cuts it "
                       f"off from the model")
            out.append(self.finding(message, where=s.where(), step=self.leaf_step, evidence={
                "leaf_backward_calls": self.leaf_calls, "without_gradient": self.leaf_no_gradient,
                "first_step": self.leaf_step}))
        return out
