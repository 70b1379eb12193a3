"""KBW034: a loss term computed with gradients that no backward() reaches, added to the loss detached.

Criterion: on at least 3 sampled steps, a loss function's output carried a graph (computed with
grad enabled, with a grad_fn) yet no backward() before the next optimizer step reached it, while
the tensor that backward() ran on adds a term that carries no gradient (an add or subtract
whose other side requires none: `term.detach() + loss`, `torch.tensor(term.item()) + loss`).
A loss only logged, or one evaluated with grad on, is passed over unless that add is there too.

Second form: on at least 3 sampled steps, a loss function's output does reach backward(), but every
path from its inputs that require grad to a leaf tensor (a parameter) passes through a subtraction
whose gradient cancels exactly: `a - (a + c)`, `(a + c) - a` or `a - a`, with c carrying no gradient.
A straight-through output `x + (q - x).detach()` subtracted from its own input x (a residual
quantizer's next residual) is such a term: its value is q - x, its gradient is 0 everywhere, so
every loss computed from it (the later quantizers' commitment losses) trains nothing. The straight-
through estimator alone (an add) and `x - q.detach()` do not cancel and are not matched.
"""
from __future__ import annotations

from collections import deque

import torch

from kb_tools.watch.checks import Check, loss_where, plural
from kb_tools.watch.checks.tensors import adds_a_constant, graph_nodes

MIN_STEPS = 3
MAX_PENDING = 16
MAX_NODES = 50_000
MAX_EXAMINED = 24   # loss calls of one site whose inputs are walked while none of them is found cancelled
MAX_SITES = 16
MAX_INPUT_NODES = 5_000


def _alpha(node) -> float | None:
    try:
        return float(node._saved_alpha)
    except (AttributeError, RuntimeError, TypeError):
        return None


def cancels(node) -> bool:
    """Is this autograd node a subtraction whose gradient is exactly zero: `a - (a + c)`, `(a + c) - a`
    or `a - a`, where c carries no gradient (a straight-through output minus its own input)?"""
    if type(node).__name__ != "SubBackward0" or _alpha(node) != 1.0:
        return False
    nexts = node.next_functions
    if len(nexts) != 2 or nexts[0][0] is None or nexts[1][0] is None:
        return False
    (a, a_nr), (b, b_nr) = nexts
    if a is b and a_nr == b_nr:
        return True
    for (outer, outer_nr), (inner, _) in (((a, a_nr), (b, b_nr)), ((b, b_nr), (a, a_nr))):
        if type(inner).__name__ == "AddBackward0" and _alpha(inner) == 1.0:
            kids = inner.next_functions
            if len(kids) == 2 and any(k is None for k, _ in kids) \
                    and any(k is outer and nr == outer_nr for k, nr in kids):
                return True
    return False


def gradient_cancelled(tensors) -> bool:
    """Whether every path from `tensors` (those that require grad) to a leaf that requires grad passes
    through a node that `cancels`, with at least one such node met: the tensors carry a graph but
    send exactly zero gradient. Breadth first, so that a healthy input (a layer's output, its weight
    one node away) is settled at once; a walk past MAX_INPUT_NODES answers False."""
    starts = [t.grad_fn for t in tensors if isinstance(t, torch.Tensor) and t.requires_grad]
    if not starts or any(fn is None for fn in starts):
        return False   # a leaf that requires grad is itself a path
    seen: dict = {}
    queue = deque(starts)
    met = False
    while queue:
        node = queue.popleft()
        if node is None or id(node) in seen:
            continue
        if len(seen) >= MAX_INPUT_NODES:
            return False
        seen[id(node)] = node   # kept alive: a freed node's id() could be reused (tensors.nodes_from)
        if hasattr(node, "variable"):
            return False
        if cancels(node):
            met = True
            continue
        queue.extend(child for child, _ in node.next_functions if child is not None)
    return met


def _walk(tensors, pending: dict, key: str) -> tuple[set, bool]:
    """(the pending tokens whose loss node was reached, whether an add/sub node has an input without
    gradient). A loss node is known by the token under `key` in its metadata dict, which lives on the node itself:
    torch 2.11 makes a new Python object for a node once the last one is freed, so an id() taken
    at the loss call would not match. Only nodes of the loss nodes' types are asked. The walk stops
    once every pending loss is reached: nothing is then missing, and a whole graph is not read on
    every sampled step of a healthy run."""
    names = {entry[0] for entry in pending.values()}
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
        self.examined: dict[tuple, list] = {}  # (kind, site) -> [calls walked, calls found cancelled]
        self.zero_now: dict[tuple, object] = {}  # cancelled terms backward() reached this step: (kind, site) -> info
        self.zero_steps = 0
        self.zero_first = None
        self.zero_terms: dict[tuple, list] = {}  # (kind, site) -> [where, sampled steps]

    def on_loss(self, call):
        out = call.output
        fn = getattr(out, "grad_fn", None)
        if call.grad_enabled and fn is not None and len(self.pending) < MAX_PENDING \
                and isinstance(getattr(fn, "metadata", None), dict):
            self.tokens += 1
            fn.metadata[self.key] = self.tokens
            self.pending[self.tokens] = (type(fn).__name__, call.info, self._cancelled(call))

    def _cancelled(self, call) -> bool:
        """Whether this call's inputs carry a graph whose gradient cancels exactly (walked while the site
        has not had MAX_EXAMINED calls without one)."""
        key = (call.kind, call.site)
        st = self.examined.get(key)
        if st is None:
            if len(self.examined) >= MAX_SITES:
                return False
            st = self.examined[key] = [0, 0]
        if st[1] == 0 and st[0] >= MAX_EXAMINED:
            return False
        st[0] += 1
        found = gradient_cancelled([call.input, call.target])
        st[1] += found
        return found

    def on_before_backward(self, tensors):
        if not self.pending:
            return
        reached, constant_added = _walk(tensors, self.pending, self.key)
        for key in reached:
            _, info, cancelled = self.pending.pop(key)
            if cancelled:
                self.zero_now.setdefault((info.kind, info.site), info)
        self.constant_added = self.constant_added or constant_added

    def on_step_pre(self, optimizer):
        s = self.session
        if s.optimizer_info(optimizer) is not s.primary_info():
            return
        if self.pending and self.constant_added and s.backward_calls:
            self.steps += 1
            self.first_step = s.step if self.first_step is None else self.first_step
            for _, info, _ in list(self.pending.values())[:4]:
                self.terms.setdefault(info.kind, (loss_where(info), info.site))
        if self.zero_now:
            self.zero_steps += 1
            self.zero_first = s.step if self.zero_first is None else self.zero_first
            for key, info in self.zero_now.items():
                if key in self.zero_terms or len(self.zero_terms) < 4:
                    self.zero_terms.setdefault(key, [loss_where(info), 0])[1] += 1
        self.pending, self.constant_added, self.zero_now = {}, False, {}

    def findings(self) -> list:
        return self._detached() + self._cancelled_terms()

    def _cancelled_terms(self) -> list:
        if self.zero_steps < MIN_STEPS:
            return []
        listed = "; ".join(f"{kind} ({where}, {plural(n, 'sampled step')})"
                           for (kind, _), (where, n) in self.zero_terms.items())
        message = (f"on {plural(self.zero_steps, 'sampled step')} a loss term reached backward() with exactly zero "
                   f"gradient: {listed}; every path from its input to a parameter passes through a subtraction "
                   f"that cancels, a - (a + c) with c detached (a straight-through output x + (q - x).detach() "
                   f"subtracted from its own input x), so the term trains nothing; subtract the detached value "
                   f"(x - q.detach()) where the straight-through output is not meant to carry the gradient")
        evidence = {"steps": self.zero_steps, "first_step": self.zero_first,
                    "terms": [{"loss": kind, "where": w, "sampled_steps": n} for (kind, _), (w, n) in self.zero_terms.items()]}
        where = next(iter(self.zero_terms), (None, None))[1]
        return [self.finding(message, evidence=evidence, step=self.zero_first, where=where, confidence=0.85)]

    def _detached(self) -> list:
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
