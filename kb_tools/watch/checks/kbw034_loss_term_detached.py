"""KBW034: a loss term computed with gradients that no backward() reaches, added to the loss detached.

Criterion: on at least 3 sampled steps, a loss function's output carried a graph (computed with
grad enabled, with a grad_fn) yet no backward() before the next optimizer step reached it, while
the tensor that backward() ran on adds a term that carries no gradient (an add or subtract
whose other side requires none: `term.detach() + loss`, `torch.tensor(term.item()) + loss`).
A loss only logged, or one evaluated with grad on, is passed over unless that add is there too.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, loss_where, plural
from kb_tools.watch.checks.tensors import adds_a_constant, graph_nodes

MIN_STEPS = 3
MAX_PENDING = 16
MAX_NODES = 50_000


def _walk(tensors, wanted: set) -> tuple[set, bool]:
    """(the wanted node ids reached, whether an add/sub node has an input without gradient)."""
    reached, constant_added = set(), False
    for node in graph_nodes(tensors, MAX_NODES):
        if id(node) in wanted:
            reached.add(id(node))
        if not constant_added and adds_a_constant(node):
            constant_added = True
    return reached, constant_added


class LossTermDetached(Check):
    __doc__ = __doc__
    code = "KBW034"
    name = "loss-term-detached"
    entry = "loss-detached-from-graph"
    title = "a loss term computed with gradients never reaches backward(): it was added to the loss detached"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.pending: dict[int, object] = {}  # grad_fn id -> LossCall info, this step
        self.constant_added = False
        self.steps = 0
        self.first_step = None
        self.terms: dict[str, tuple] = {}  # loss kind -> (where, its site)

    def on_loss(self, call):
        out = call.output
        fn = getattr(out, "grad_fn", None)
        if call.grad_enabled and fn is not None and len(self.pending) < MAX_PENDING:
            self.pending[id(fn)] = call.info

    def on_before_backward(self, tensors):
        if not self.pending:
            return
        reached, constant_added = _walk(tensors, set(self.pending))
        for key in reached:
            self.pending.pop(key, None)
        self.constant_added = self.constant_added or constant_added

    def on_step_pre(self, optimizer):
        s = self.session
        if s.optimizer_info(optimizer) is not s.primary_info():
            return
        if self.pending and self.constant_added and s.backward_calls:
            self.steps += 1
            self.first_step = s.step if self.first_step is None else self.first_step
            for info in list(self.pending.values())[:4]:
                self.terms.setdefault(info.kind, (loss_where(info), info.site))
        self.pending, self.constant_added = {}, False

    def findings(self) -> list:
        if self.steps < MIN_STEPS:
            return []
        listed = "; ".join(f"{kind} ({where})" for kind, (where, _) in list(self.terms.items())[:4])
        message = (f"on {plural(self.steps, 'sampled step')} a loss term computed with gradients never reached "
                   f"backward(): {listed}; the loss backward() ran on adds a term that carries no gradient "
                   f"(a .detach(), .item() or torch.tensor() on the way), so that term trains nothing")
        evidence = {"steps": self.steps, "first_step": self.first_step,
                    "terms": [{"loss": k, "where": w} for k, (w, _) in self.terms.items()]}
        where = next(iter(self.terms.values()), (None, None))[1]
        return [self.finding(message, evidence=evidence, step=self.first_step,
                             where=where)]
