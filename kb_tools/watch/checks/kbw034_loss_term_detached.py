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


def _walk(tensors, pending: dict, key: str) -> tuple[set, bool]:
    """(the pending tokens whose loss node was reached, whether an add/sub node has an input without
    gradient). A loss node is known by the token under `key` in its metadata dict, which lives on the node itself:
    torch 2.11 makes a new Python object for a node once the last one is freed, so an id() taken
    at the loss call would not match. Only nodes of the loss nodes' types are asked. The walk stops
    once every pending loss is reached: nothing is then missing, and a whole graph is not read on
    every sampled step of a healthy run."""
    names = {name for name, _ in pending.values()}
    reached, constant_added = set(), False
    for node in graph_nodes(tensors, MAX_NODES):
        if type(node).__name__ in names:
            token = getattr(node, "metadata", {}).get(key)
            if token in pending:
                reached.add(token)
                if len(reached) == len(pending):
                    break
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
        self.pending: dict[int, tuple] = {}  # token -> (the loss node's type name, LossCall info), this step
        self.tokens = 0
        self.key = f"kb_watch_loss_{id(self)}"  # one per session
        self.constant_added = False
        self.steps = 0
        self.first_step = None
        self.terms: dict[str, tuple] = {}  # loss kind -> (where, its site)

    def on_loss(self, call):
        out = call.output
        fn = getattr(out, "grad_fn", None)
        if call.grad_enabled and fn is not None and len(self.pending) < MAX_PENDING \
                and isinstance(getattr(fn, "metadata", None), dict):
            self.tokens += 1
            fn.metadata[self.key] = self.tokens
            self.pending[self.tokens] = (type(fn).__name__, call.info)

    def on_before_backward(self, tensors):
        if not self.pending:
            return
        reached, constant_added = _walk(tensors, self.pending, self.key)
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
            for _, info in list(self.pending.values())[:4]:
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
