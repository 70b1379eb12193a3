"""KBW091: a loss term copied out of the graph by torch.tensor() and added to the loss, so it trains nothing.

Criterion: on at least 3 sampled steps, torch.tensor() (or torch.as_tensor() of a list or tuple), called
with grad enabled, copied tensors that require grad and carry a graph (a grad_fn, such as per-sample loss
terms gathered with `torch.tensor([...])`), and at the next backward() of that step both hold:
- the tensor backward() ran on was made from the copy, and the copy (or a tensor made from it) entered it
  by an add or subtract with a tensor that carries gradient, or a stack or cat with one, followed by
  nothing but sums, means, further adds, reshapes and products with a factor that carries no gradient:
  it is a term of the loss, whose value counts and whose gradient is gone;
- that backward() reached none of the copied tensors' own graph nodes: no other path trains them.
A copy made when no watched model ran with grad since the last backward() (a loss logged after its
step) is not followed; a copy only logged or all-reduced never reaches backward(); a copy that multiplies or divides a term
with a graph (a return or an advantage in REINFORCE) weighs that term, and one subtracted inside a
square, an abs or a loss function (a target, `(q - torch.tensor(target)) ** 2`) shapes another term's
gradient: both are passed over. A copy of values that need no grad (numbers, numpy arrays, .item(),
.detach()) copies no graph and is not looked at, nor is torch.Tensor(list). From a copy to that
backward() the tensors made from the copy are followed by a torch function mode (sampled steps only,
and only while no other function mode than another check's trace is active; it is taken off at the next
backward() or optimizer step, sampled or not).
"""
from __future__ import annotations

import weakref

import torch
from torch.overrides import TorchFunctionMode

from kb_tools.watch.checks import Check, plural
from kb_tools.watch.checks.tensors import graph_nodes
from kb_tools.watch.sites import user_site

MIN_STEPS = 3
MAX_COPIES = 16     # copies followed from one copy to the next backward()
MAX_TAGGED = 64     # graph nodes of copied tensors marked per copy
MAX_OPS = 20_000    # torch calls one trace follows before it gives up (the mode stays inert until removed)
MAX_NODES = 50_000
MAX_SITES = 4
ADDS = frozenset({"add", "add_", "__add__", "__radd__", "__iadd__", "sub", "sub_", "subtract", "rsub", "__sub__",
                  "__rsub__", "__isub__", "stack", "cat", "concat", "concatenate", "hstack", "vstack"})
PRODUCTS = frozenset({"mul", "mul_", "multiply", "__mul__", "__rmul__", "__imul__", "div", "div_", "divide", "true_divide",
                      "__truediv__", "__rtruediv__", "__itruediv__"})
# what a loss is summed up with after its terms: a term added before one of these is still a term of the result
LINEAR = ADDS | PRODUCTS | frozenset({
    "neg", "negative", "__neg__", "mean", "sum", "nansum", "nanmean", "view", "reshape", "flatten", "squeeze",
    "unsqueeze", "clone", "contiguous", "to", "float", "double", "half", "bfloat16", "__getitem__", "select",
    "expand", "expand_as", "view_as", "reshape_as", "detach", "__get__", "tensor", "as_tensor"})


def _tensors(args, kwargs):
    """The tensors among a call's arguments, one level into lists and tuples (torch.stack([...]))."""
    for value in (*args, *(kwargs.values() if kwargs else ())):
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            for item in value[:64]:
                if isinstance(item, torch.Tensor):
                    yield item


class CopyTrace(TorchFunctionMode):
    """Follows, from a copy to the next backward(), the tensors made from copies: which copies each was
    made from, and which of those entered a tensor that carries gradient as an added term. Tensors are
    known by id while alive (a weak dictionary says which ids still name the tensor that was marked)."""

    def __init__(self):
        super().__init__()
        self.alive: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self.marks: dict[int, tuple[frozenset, frozenset]] = {}  # id -> (copies it was made from, those added)
        self.joins: dict[int, str | None] = {}  # copy token -> where it was first added to a term with gradient
        self.ops = 0
        self.on = True

    def mark(self, tensor, tokens: frozenset, added: frozenset = frozenset()) -> None:
        self.alive[id(tensor)] = tensor
        self.marks[id(tensor)] = (tokens, added)

    def marked(self, tensor) -> tuple[frozenset, frozenset] | None:
        return self.marks.get(id(tensor)) if self.alive.get(id(tensor)) is tensor else None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.on:
            self.ops += 1
            try:
                if self.ops > MAX_OPS:
                    self.on = False
                else:
                    self._follow(func, args, kwargs, out)
            except Exception:  # noqa: BLE001 - a tensor-like that answers oddly: stop following, never fail the call
                self.on = False
        return out

    def _follow(self, func, args, kwargs, out) -> None:
        inputs = list(_tensors(args, kwargs))
        found = [(t, m) for t in inputs if (m := self.marked(t)) is not None]
        if not found:
            return
        tokens = frozenset().union(*(m[0] for _, m in found))
        added = frozenset().union(*(m[1] for _, m in found))
        name = getattr(func, "__name__", "")
        with_grad = sum(t.requires_grad for t in inputs)
        if name in ADDS and with_grad:
            new = frozenset().union(*(m[0] for t, m in found if not t.requires_grad)) - added
            if new:
                site = user_site(depth=2)
                for token in new:
                    self.joins.setdefault(token, site)
                added = added | new
        elif name not in LINEAR or (name in PRODUCTS and with_grad > 1):
            added = frozenset()  # the copy shapes another term (a target inside a square, a factor), not a term
        outputs = out if isinstance(out, (list, tuple)) else (out,)
        for o in outputs[:64]:
            if isinstance(o, torch.Tensor):
                self.mark(o, tokens, added)


def _only_traces_active() -> bool:
    """Is every torch function mode now active a CopyTrace (another check's, which _remove takes off
    wherever it sits), so that one more can go on top?"""
    return all(isinstance(torch._C._get_function_stack_at(i), CopyTrace)
               for i in range(torch._C._len_torch_function_stack()))


def _remove(mode) -> bool:
    """Take `mode` off this thread's torch function mode stack, wherever it is, leaving the others in
    their order; False when it is not there (torch takes a mode off while its own handler runs)."""
    above, found = [], False
    while torch._C._len_torch_function_stack() > 0:
        top = torch._C._pop_torch_function_stack()
        if top is mode:
            found = True
            break
        above.append(top)
    for other in reversed(above):
        torch._C._push_on_torch_function_stack(other)
    return found


class LossTermCopiedByTensor(Check):
    __doc__ = __doc__
    code = "KBW091"
    name = "loss-term-copied-by-tensor"
    entry = "loss-detached-from-graph"
    title = "a loss term computed with gradients is copied by torch.tensor() and added to the loss: it trains nothing"
    confidence = 0.85
    functions: tuple[str, ...] = ("tensor", "as_tensor")  # the on_tensor_copy calls this check follows

    def __init__(self, session):
        super().__init__(session)
        self.key = f"kb_watch_copy_{id(self)}"  # one per session
        self.trace: CopyTrace | None = None
        self.retired: list = []  # traces still on a mode stack (taken off at the next chance)
        self.copies: dict[int, tuple] = {}  # token -> (function, site, tensors copied, their shapes), this trace
        self.kinds: set[str] = set()  # type names of the marked nodes
        self.tokens = 0
        self.now: dict[str, tuple] = {}  # copy site -> (function, tensors, shapes, where it was added), this step
        self.steps = 0
        self.first_step = None
        self.sites: dict[str, list] = {}  # copy site -> [function, tensors, shapes, where added, sampled steps]
        self.forward_mark: int | None = None  # backward() calls counted at the last forward of a model with grad

    def on_root_forward(self, info, grad_enabled):
        if grad_enabled:
            self.forward_mark = self.session.backward_calls

    def on_tensor_copy(self, name, sources, copy, site):
        if name not in self.functions:
            return
        if self.forward_mark != self.session.backward_calls:
            return  # no forward with grad since the last backward(): a value logged after it, not a term of the next
        graphs = [t.grad_fn for t in sources if t.grad_fn is not None]
        if not graphs or len(self.copies) >= MAX_COPIES or torch.utils.data.get_worker_info() is not None \
                or torch.compiler.is_compiling():
            return
        self._tidy()
        if self.trace is None:
            if not _only_traces_active():
                return  # another mode is active: one pushed now could be popped by that mode's exit
            self.trace = CopyTrace()
            torch._C._push_on_torch_function_stack(self.trace)
        self.tokens += 1
        for fn in graphs[:MAX_TAGGED]:
            metadata = getattr(fn, "metadata", None)
            if isinstance(metadata, dict):
                marks = metadata.setdefault(self.key, [])
                marks.append(self.tokens)
                del marks[:-8]  # a node that lives on (a cached term copied every step) keeps its last few
                self.kinds.add(type(fn).__name__)
        shapes = [list(t.shape) for t in sources[:4]]
        self.copies[self.tokens] = (name, site, len(sources), shapes)
        self.trace.mark(copy, frozenset((self.tokens,)))

    def on_before_backward(self, tensors):
        trace = self.trace
        if trace is None:
            return
        added: set = set()
        for t in tensors:
            marks = trace.marked(t) if isinstance(t, torch.Tensor) else None
            if marks is not None:
                added |= marks[1]
        joins, copies = trace.joins, self.copies
        self._stop()
        pending = {token: copies[token] for token in added if token in copies}
        if not pending:
            return
        for token in self._untrained(tensors, pending):
            name, site, n, shapes = pending[token]
            self.now.setdefault(site, (name, n, shapes, joins.get(token)))

    def _untrained(self, tensors, pending: dict) -> set:
        """The copies added to the loss whose values no other path of the graph trains."""
        return pending.keys() - self._reached(tensors, set(pending))

    def _reached(self, tensors, tokens: set) -> set:
        """The copy tokens some of whose marked nodes the graph behind `tensors` holds (the walk ends once
        all are found)."""
        reached: set = set()
        for node in graph_nodes(tensors, MAX_NODES):
            if type(node).__name__ in self.kinds:
                reached.update(t for t in getattr(node, "metadata", {}).get(self.key, ()) if t in tokens)
                if reached >= tokens:
                    break
        return reached

    def _stop(self) -> None:
        if self.trace is not None:
            self.trace.on = False
            self.retired.append(self.trace)
            self.trace = None
        self.copies, self.kinds = {}, set()
        self._tidy()

    def _tidy(self) -> None:
        """Take the traces that ended off the mode stack (one whose handler is running is not on it: it
        goes at the next chance)."""
        self.retired = [trace for trace in self.retired if not _remove(trace)][:8]

    def on_any_backward(self, tensors):
        self._stop_unsampled()

    def on_any_step_pre(self, optimizer):
        self._stop_unsampled()

    def _stop_unsampled(self) -> None:
        """On an unsampled step nothing is judged: a trace still on is taken off (sampled steps judge it in
        on_before_backward and on_step_pre), and one stopped inside its own handler (backward() is a torch
        function, run with the mode taken off) goes now."""
        if self.trace is not None and not self.session.sampled:
            self._stop()
        elif self.retired:
            self._tidy()

    def on_step_pre(self, optimizer):
        self._stop()
        s = self.session
        if s.optimizer_info(optimizer) is not s.primary_info():
            return
        if self.now:
            self.steps += 1
            self.first_step = s.step if self.first_step is None else self.first_step
            for site, (name, n, shapes, where) in self.now.items():
                if site in self.sites or len(self.sites) < MAX_SITES:
                    self.sites.setdefault(site, [name, n, shapes, where, 0])[4] += 1
        self.now = {}

    def on_end(self):
        self._stop()
        self.retired = []  # a trace still held by a running handler is inert (on is False)

    def findings(self) -> list:
        if self.steps < MIN_STEPS:
            return []
        message, evidence = self._describe()
        where = next(iter(self.sites), None)
        return [self.finding(message, evidence=evidence, step=self.first_step, where=where)]

    def _describe(self) -> tuple[str, dict]:
        """The finding's message and evidence, from the sites recorded."""
        listed = "; ".join(f"torch.{name}() at {site} copied {plural(n, 'tensor')} that require grad"
                           + (f", added to the loss at {where}" if where else "")
                           + f" ({plural(k, 'sampled step')})"
                           for site, (name, n, _, where, k) in self.sites.items())
        message = (f"on {plural(self.steps, 'sampled step')} a loss term computed with gradients was copied out of "
                   f"the graph and the copy added to the loss backward() ran on: {listed}; the copy holds the "
                   f"values without their graph and backward() reached no other path to them, so that term trains "
                   f"nothing while it shows in the loss; gather terms with torch.stack() or torch.cat() instead")
        evidence = {"steps": self.steps, "first_step": self.first_step,
                    "copies": [{"function": f"torch.{name}", "site": site, "tensors_requiring_grad": n,
                                "shapes": shapes, "added_at": where, "sampled_steps": k}
                               for site, (name, n, shapes, where, k) in self.sites.items()]}
        return message, evidence
