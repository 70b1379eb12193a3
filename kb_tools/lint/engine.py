"""`kb lint`: find the knowledge base's bugs in a training script by reading its code.

Many entries describe a mistake that is visible in the source: a softmax fed to
CrossEntropyLoss, `zero_grad` between `backward` and `step`, `model.eval()` in
the loop with no `model.train()` after it. Each rule here has a code, detects one
entry's mistake and points at that entry (`kb show ENTRY`). The analysis is the
standard library's `ast` plus a light, per-function data flow: which names hold
losses, optimizers, schedulers, loaders, scalers and models, what a name was last
assigned from, and the order of calls inside a loop. It prefers silence to a
guess: a rule fires only when the code shows the mistake, so a clean report is
not a proof, but a finding is worth reading.
"""
from __future__ import annotations

import ast
import os
import sys
from dataclasses import asdict, dataclass

from kb_tools.core.util import UsageError, read_regular

# code -> (name, entry id, message). The entry explains the cause, the fix and how to check.
RULES = {
    "KBL001": ("softmax-before-cross-entropy", "double-softmax",
               "softmax output passed to a cross-entropy loss, which applies log_softmax itself: pass the raw logits"),
    "KBL002": ("sigmoid-before-bce", "bce-with-logits",
               "sigmoid output passed to {loss}: use BCEWithLogitsLoss on the raw logits (stable, no saturation)"),
    "KBL003": ("nll-on-raw-scores", "nll-needs-log-softmax",
               "NLLLoss on scores that are not log-probabilities: apply log_softmax first, or use CrossEntropyLoss"),
    "KBL004": ("zero-grad-missing", "optimizer-step-order",
               "the loop calls backward() and step() but gradients are never zeroed: they accumulate across steps"),
    "KBL005": ("zero-grad-between-backward-and-step", "optimizer-step-order",
               "zero_grad() between backward() and step() wipes the gradients: step() then moves nothing"),
    "KBL006": ("scheduler-before-optimizer", "scheduler-step-order",
               "scheduler.step() runs before optimizer.step(): the first learning rate is skipped"),
    "KBL007": ("eval-without-train", "train-eval-mode",
               "{what} puts the model in eval mode inside the training loop and nothing calls .train() again: "
               "later epochs train with dropout off and BatchNorm frozen"),
    "KBL008": ("optimizer-before-new-head", "params-not-in-optimizer",
               "a new module is attached to {model} after its optimizer was built: its parameters are not in the "
               "optimizer and never train"),
    "KBL009": ("train-loader-not-shuffled", "train-shuffle-off",
               "training DataLoader {how}: every epoch sees the samples in the same order (often sorted by class)"),
    "KBL010": ("loss-detached-from-graph", "loss-detached-from-graph",
               "the loss is computed from {how}: it is cut from the graph, so backward() reaches no parameter"),
    "KBL011": ("accumulation-without-division", "grad-accumulation-scaling",
               "gradients are accumulated over several backward() calls per step() but the loss is not divided by "
               "the number of micro-batches: the effective learning rate is multiplied by it"),
    "KBL012": ("clip-before-unscale", "clip-before-unscale",
               "gradients are clipped while still multiplied by the GradScaler's scale: call scaler.unscale_(optimizer) "
               "before clipping"),
    "KBL013": ("next-iter-in-loop", "same-batch-every-step",
               "next(iter(loader)) inside the loop starts a new pass over the loader every step: without shuffling "
               "it is the same first batch each time"),
    "KBL014": ("sampler-set-epoch-missing", "distributed-sampler-set-epoch",
               "DistributedSampler is never told the epoch (sampler.set_epoch(epoch)): every epoch uses the same order"),
    "KBL015": ("optimizer-created-in-loop", "stale-optimizer-state",
               "the optimizer is created inside the training loop: its state (momentum, Adam moments) restarts every "
               "iteration"),
    "KBL016": ("fp16-params-with-adam", "adam-eps-low-precision",
               "the model's parameters are cast to float16 and trained with {opt}: its eps and second moment underflow "
               "in fp16; keep fp32 weights and use autocast"),
}

CE_LOSSES = {"torch.nn.CrossEntropyLoss", "torch.nn.functional.cross_entropy"}
BCE_LOSSES = {"torch.nn.BCELoss", "torch.nn.functional.binary_cross_entropy"}
BCE_LOGITS = {"torch.nn.BCEWithLogitsLoss", "torch.nn.functional.binary_cross_entropy_with_logits"}
NLL_LOSSES = {"torch.nn.NLLLoss", "torch.nn.functional.nll_loss"}
SOFTMAX = {"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"}
LOG_SOFTMAX = {"torch.log_softmax", "torch.nn.functional.log_softmax", "torch.special.log_softmax"}
SIGMOID = {"torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"}
MODULE_ACTS = {"torch.nn.Softmax": "softmax", "torch.nn.LogSoftmax": "log_softmax", "torch.nn.Sigmoid": "sigmoid"}
ADAM = {"torch.optim.Adam", "torch.optim.AdamW", "torch.optim.Adamax", "torch.optim.NAdam", "torch.optim.RAdam"}
LOSS_KINDS = {**{n: "ce" for n in CE_LOSSES}, **{n: "bce" for n in BCE_LOSSES},
              **{n: "bce-logits" for n in BCE_LOGITS}, **{n: "nll" for n in NLL_LOSSES}}
MAX_SOURCE_BYTES = 5 << 20
# Not a rule: a file that cannot be linted (not a regular file, unreadable, not Python) is reported in
# the findings' form, so one bad file neither hides the other files' findings nor passes unnoticed.
UNLINTABLE, UNLINTABLE_NAME = "KBL000", "cannot-lint"


@dataclass
class Finding:
    """One mistake found: where, which rule, what to read."""

    path: str
    line: int
    col: int
    code: str
    message: str
    entry: str | None  # None for UNLINTABLE: no entry explains a file that could not be read

    def __str__(self):
        more = f" (kb show {self.entry})" if self.entry else ""
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}{more}"

    def to_dict(self) -> dict:
        return {**asdict(self), "name": RULES[self.code][0] if self.code in RULES else UNLINTABLE_NAME}


def rules_for(entry_id: str) -> list:
    """The lint rules that detect an entry's mistake, as (code, name)."""
    return [(code, name) for code, (name, entry, _) in RULES.items() if entry == entry_id]


# ---------------------------------------------------------------- names

class Imports:
    """What local names stand for: `nn` -> torch.nn, `CrossEntropyLoss` -> torch.nn.CrossEntropyLoss."""

    def __init__(self, tree):
        self.names = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.names[a.asname] = a.name
                    else:
                        self.names.setdefault(a.name.split(".")[0], a.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.names[a.asname or a.name] = f"{node.module}.{a.name}"

    def canon(self, expr) -> str | None:
        """The dotted name an expression refers to, with imports resolved (`F.softmax` ->
        torch.nn.functional.softmax); None for anything that is not a plain dotted name."""
        if isinstance(expr, ast.Name):
            return self.names.get(expr.id)
        if isinstance(expr, ast.Attribute):
            base = self.canon(expr.value)
            return f"{base}.{expr.attr}" if base else None
        return None


def dotted(expr) -> str | None:
    """`self.criterion` -> "self.criterion", `loss` -> "loss"; None for anything else."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        base = dotted(expr.value)
        return f"{base}.{expr.attr}" if base else None
    return None


def method_call(node, *names) -> str | None:
    """The receiver of `X.name(...)` for one of `names` ("" when it is not a plain name), else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names:
        return dotted(node.func.value) or ""
    return None


class _Index:
    """Every node of the file being linted, gathered in one walk: the calls in source order
    (a node's calls are a slice found by position, not another walk), and nodes by type."""

    calls, starts, by_type, grad_assigns = [], [], {}, None

    @classmethod
    def build(cls, tree):
        from bisect import bisect_left, bisect_right
        cls.left, cls.right = bisect_left, bisect_right
        by_type = {}
        for node in ast.walk(tree):
            by_type.setdefault(type(node), []).append(node)
        cls.by_type = by_type
        cls.calls = sorted(by_type.get(ast.Call, []), key=lambda n: (n.lineno, n.col_offset))
        cls.starts = [(n.lineno, n.col_offset) for n in cls.calls]

    @classmethod
    def clear(cls):
        cls.calls, cls.starts, cls.by_type, cls.grad_assigns = [], [], {}, None

    @classmethod
    def of(cls, *types):
        return [n for t in types for n in cls.by_type.get(t, [])]


def _within(node, inner) -> bool:
    """Whether `inner` lies inside `node`'s source span."""
    return (node.lineno, node.col_offset) <= (inner.lineno, inner.col_offset) and \
        (inner.end_lineno, inner.end_col_offset) <= (node.end_lineno, node.end_col_offset)


def calls_in(node):
    """Every call inside `node` (itself included), in source order."""
    if isinstance(node, ast.Module):
        return _Index.calls
    lo = _Index.left(_Index.starts, (node.lineno, node.col_offset))
    hi = _Index.right(_Index.starts, (node.end_lineno, node.end_col_offset))
    return [c for c in _Index.calls[lo:hi] if _within(node, c)]


def keyword(call, name):
    return next((k.value for k in call.keywords if k.arg == name), None)


def is_false(expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is False


# ---------------------------------------------------------------- the analysis of one file

class Analysis:
    """The facts the rules read, gathered once per file."""

    def __init__(self, tree, imports: Imports):
        self.tree, self.imp = tree, imports
        self.kinds = {}          # dotted name -> "loss:ce" | "optimizer" | "scheduler" | "loader" | ...
        self.values = {}         # dotted name -> the expression it was last assigned (file order)
        self.class_output = {}   # class name -> "softmax" | "log_softmax" | "sigmoid" | "raw" (what forward returns)
        self.model_output = {}   # dotted name -> what calling it returns, as above
        self.evaluators = set()  # functions defined here that call .eval() and never .train()
        self.zeroers = set()     # functions defined here that zero gradients (zero_grad, p.grad = None)
        self.assigned = {}       # id(call) -> the dotted name its result is assigned to
        self._classes()
        self._assignments()
        self._evaluators()

    # -- what an expression is
    def activation(self, expr, depth: int = 0) -> str | None:
        """"softmax", "log_softmax", "sigmoid" or "raw" when `expr` visibly produces one; None if unknown."""
        if depth > 6 or expr is None:
            return None
        if isinstance(expr, ast.Call):
            act = self._function_activation(expr)
            if act or isinstance(expr.func, ast.Call):
                return act or self._module_output(expr.func)   # nn.Softmax(dim=1)(x)
            callee = dotted(expr.func)
            if callee is None:
                return None
            return self.model_output.get(callee) or self._module_output(self.values.get(callee))
        name = dotted(expr)
        if name is not None and name in self.values and self.values[name] is not expr:
            return self.activation(self.values[name], depth + 1)
        return None

    def _function_activation(self, call) -> str | None:
        """The activation a function or tensor method applies: torch.softmax(x), F.sigmoid(x), x.log_softmax()."""
        name = self.imp.canon(call.func)
        for group, act in ((SOFTMAX, "softmax"), (LOG_SOFTMAX, "log_softmax"), (SIGMOID, "sigmoid")):
            if name in group:
                return act
        if name is None and isinstance(call.func, ast.Attribute) and call.func.attr in ("softmax", "log_softmax", "sigmoid"):
            return call.func.attr
        return None

    def _module_output(self, module) -> str | None:
        """What a module built by the constructor call `module` returns: nn.Softmax -> "softmax",
        nn.Linear -> "raw", an nn.Sequential -> what its last layer returns; None if unknown."""
        if not isinstance(module, ast.Call):
            return None
        name = self.imp.canon(module.func)
        if name in MODULE_ACTS:
            return MODULE_ACTS[name]
        if name == "torch.nn.Linear":
            return "raw"
        if name == "torch.nn.Sequential" and module.args:
            return self._module_output(module.args[-1])
        return None

    def loss_kind(self, call) -> str | None:
        """"ce", "bce", "bce-logits", "nll" or "other" when `call` computes a torch loss; else None."""
        name = self.imp.canon(call.func)
        if name is not None and _torch_loss(name):
            return LOSS_KINDS.get(name, "other")
        if isinstance(call.func, ast.Call) and _torch_loss(self.imp.canon(call.func.func) or ""):
            return LOSS_KINDS.get(self.imp.canon(call.func.func), "other")   # nn.CrossEntropyLoss()(x, y)
        kind = self.kinds.get(dotted(call.func) or "")
        return kind[5:] if kind and kind.startswith("loss:") else None

    # -- gathering
    def _classes(self):
        for cls in _Index.of(ast.ClassDef):
            attrs = {}
            for node in ast.walk(cls):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    for t in node.targets:
                        if dotted(t):
                            attrs[dotted(t)] = node.value
            forward = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "forward"), None)
            if forward is None:
                continue
            returns = [n for n in ast.walk(forward) if isinstance(n, ast.Return) and n.value is not None]
            if len(returns) != 1:
                continue
            local = {dotted(t): n.value for n in ast.walk(forward) if isinstance(n, ast.Assign) for t in n.targets
                     if dotted(t)}
            self.class_output[cls.name] = self._returned(returns[0].value, local, attrs)

    def _returned(self, expr, local, attrs, depth=0):
        """What a forward's returned expression is, following its local names and the modules on self."""
        if depth > 6:
            return None
        if isinstance(expr, ast.Call):
            return self._function_activation(expr) or self._module_output(attrs.get(dotted(expr.func) or ""))
        name = dotted(expr)
        if name in local and local[name] is not expr:
            return self._returned(local[name], local, attrs, depth + 1)
        return None

    def _assignments(self):
        nodes = sorted(_Index.of(ast.Assign, ast.AnnAssign), key=lambda n: (n.lineno, n.col_offset))
        for node in nodes:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            for target in targets:
                name = dotted(target)
                if name is None or value is None:
                    continue
                self.values[name] = value
                kind = self._kind_of(value)
                if kind:
                    self.kinds[name] = kind
                if isinstance(value, ast.Call):
                    cname = value.func.id if isinstance(value.func, ast.Name) else None
                    if cname in self.class_output:
                        self.model_output[name] = self.class_output[cname]
                    elif self.imp.canon(value.func) == "torch.nn.Sequential":
                        self.model_output[name] = self._module_output(value)

    def _kind_of(self, value) -> str | None:
        if not isinstance(value, ast.Call):
            return None
        name = self.imp.canon(value.func) or ""
        if _torch_loss(name) and name.split(".")[-1][0].isupper():
            return "loss:" + LOSS_KINDS.get(name, "other")
        if name.startswith("torch.optim.lr_scheduler."):
            return "scheduler"
        if name.startswith("torch.optim.") and name.split(".")[-1][:1].isupper():
            return "optimizer"
        if name in ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"):
            return "loader"
        if name.endswith("DistributedSampler"):
            return "sampler:distributed"
        if name.endswith("GradScaler"):
            return "scaler"
        return None

    def _evaluators(self):
        for node in _Index.of(ast.Assign):
            if isinstance(node.value, ast.Call) and dotted(node.targets[0]):
                self.assigned[id(node.value)] = dotted(node.targets[0])
        for fn in _Index.of(ast.FunctionDef, ast.AsyncFunctionDef):
            names = [n.func.attr for n in calls_in(fn) if isinstance(n.func, ast.Attribute)]
            if "eval" in names and "train" not in names and not _trains(fn):
                self.evaluators.add(fn.name)
            if _zeroes(fn):
                self.zeroers.add(fn.name)


def _torch_loss(name: str) -> bool:
    """torch.nn.XLoss classes and torch.nn.functional losses (mse_loss, cross_entropy, ...)."""
    if name.startswith("torch.nn.functional."):
        short = name.rsplit(".", 1)[-1]
        return short.endswith("_loss") or short in ("cross_entropy", "binary_cross_entropy",
                                                    "binary_cross_entropy_with_logits", "kl_div")
    return name.startswith("torch.nn.") and name.count(".") == 2 and name.endswith("Loss")


def _zeroes(node) -> bool:
    """Whether `node` zeroes gradients: zero_grad(), `p.grad = None` or `p.grad.zero_()`."""
    for c in calls_in(node):
        if method_call(c, "zero_grad") is not None:
            return True
        if method_call(c, "zero_") is not None and isinstance(c.func.value, ast.Attribute) and c.func.value.attr == "grad":
            return True
    if _Index.grad_assigns is None:
        _Index.grad_assigns = [n for n in _Index.of(ast.Assign)
                               if any(isinstance(t, ast.Attribute) and t.attr == "grad" for t in n.targets)]
    return any(_within(node, n) for n in _Index.grad_assigns)


def _trains(node) -> bool:
    """Whether `node` holds a training step: a backward() call."""
    return any(method_call(n, "backward") is not None for n in calls_in(node))


def _loops(node):
    return [n for n in ast.walk(node) if isinstance(n, (ast.For, ast.While, ast.AsyncFor))]


def _functions(tree):
    """The module body and every function, each analysed as its own scope."""
    yield tree
    yield from _Index.of(ast.FunctionDef, ast.AsyncFunctionDef)


def _own_statements(scope):
    """The statements of a scope without those of functions or classes nested in it."""
    out, stack = [], list(getattr(scope, "body", []))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        out.append(node)
        for field in ("body", "orelse", "finalbody", "handlers"):
            stack.extend(getattr(node, field, []) or [])
    return out


# ---------------------------------------------------------------- the rules

def _check_loss_inputs(a: Analysis, emit):
    for call in _Index.calls:
        kind = a.loss_kind(call)
        if kind is None or not call.args:
            continue
        pred = call.args[0]
        act = a.activation(pred)
        if kind == "ce" and act == "softmax":
            emit(call, "KBL001")
        elif kind in ("bce", "bce-logits") and act == "sigmoid":
            loss = "BCEWithLogitsLoss, which applies sigmoid again" if kind == "bce-logits" else "BCELoss"
            emit(call, "KBL002", loss=loss)
        elif kind == "nll" and act in ("softmax", "raw", "sigmoid"):
            emit(call, "KBL003")
        how = _detached(pred)
        if how:
            emit(call, "KBL010", how=how)


def _detached(expr) -> str | None:
    """How a loss input was cut from the graph, if visibly: `.detach()`, `.data`, `.item()`, `.numpy()`."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "detach", "item", "numpy", "tolist"):
            return f"`.{node.func.attr}()`"
        if isinstance(node, ast.Attribute) and node.attr == "data":
            return "`.data`"
    return None


def _check_loops(a: Analysis, emit):
    for scope in _functions(a.tree):
        own = _own_statements(scope)
        loops = [n for n in own if isinstance(n, (ast.For, ast.While, ast.AsyncFor))]
        inner = {id(lp) for lp in loops if any(o is not lp and _within(o, lp) for o in loops)}
        outer = [lp for lp in loops if id(lp) not in inner]
        zeroes = any(_zeroes(st) for st in getattr(scope, "body", [])) or any(
            isinstance(c.func, ast.Name) and c.func.id in a.zeroers for st in own for c in calls_in(st))
        for loop in loops:
            calls = calls_in(loop)
            backward = [c for c in calls if method_call(c, "backward") is not None]
            steps = [c for c in calls if method_call(c, "step") is not None and not _is_scheduler(a, method_call(c, "step"))]
            if id(loop) not in inner and backward and steps and not zeroes:
                emit(backward[0], "KBL004")
            _order_rules(a, loop, emit)
            for c in calls:
                if backward and isinstance(c.func, ast.Name) and c.func.id == "next" and c.args and \
                        isinstance(c.args[0], ast.Call) and isinstance(c.args[0].func, ast.Name) and c.args[0].func.id == "iter":
                    emit(c, "KBL013")
                if backward and id(loop) not in inner and a._kind_of(c) == "optimizer" and id(c) in a.assigned:
                    emit(c, "KBL015")
        for loop in outer:
            if _trains(loop):
                _eval_rule(a, loop, emit)
                _accumulation_rule(a, loop, emit)


def _is_scheduler(a: Analysis, name: str) -> bool:
    return a.kinds.get(name) == "scheduler" or (a.kinds.get(name) is None and "sched" in name.lower())


def _order_rules(a: Analysis, loop, emit):
    """Order of calls in one block of the loop body: zero_grad between backward and step,
    scheduler.step before optimizer.step."""
    holders = _Index.of(ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try)
    blocks = [loop.body] + [getattr(n, f) for n in holders if n is not loop and _within(loop, n)
                            for f in ("body", "orelse") if isinstance(getattr(n, f, None), list)]
    for block in blocks:
        seq = [c for stmt in block for c in calls_in(stmt)]
        last_backward = None
        for c in seq:
            if method_call(c, "backward") is not None:
                last_backward = c
            elif method_call(c, "zero_grad") is not None and last_backward is not None:
                later_step = any(method_call(s, "step") is not None and not _is_scheduler(a, method_call(s, "step"))
                                 and (s.lineno, s.col_offset) > (c.lineno, c.col_offset) for s in seq)
                if later_step:
                    emit(c, "KBL005")
                last_backward = None
            elif method_call(c, "step") is not None and not _is_scheduler(a, method_call(c, "step")):
                last_backward = None
    body_calls = [c for stmt in loop.body for c in calls_in(stmt)]
    first_sched = next((c for c in body_calls if method_call(c, "step") is not None
                        and a.kinds.get(method_call(c, "step")) == "scheduler"), None)
    first_opt = next((c for c in body_calls if method_call(c, "step") is not None
                      and a.kinds.get(method_call(c, "step")) == "optimizer"), None)
    if first_sched is not None and first_opt is not None and \
            (first_sched.lineno, first_sched.col_offset) < (first_opt.lineno, first_opt.col_offset):
        emit(first_sched, "KBL006")


def _eval_rule(a: Analysis, loop, emit):
    calls = calls_in(loop)
    if any(method_call(c, "train") is not None for c in calls):
        return
    for c in calls:
        if method_call(c, "eval") is not None:
            emit(c, "KBL007", what=f"{method_call(c, 'eval') or 'the model'}.eval()")
            return
        if isinstance(c.func, ast.Name) and c.func.id in a.evaluators:
            emit(c, "KBL007", what=f"{c.func.id}()")
            return


def _accumulation_rule(a: Analysis, loop, emit):
    """backward() every iteration, step() only under `if ... % N == 0`, loss never divided."""
    conditional_step = False
    for node in (n for n in _Index.of(ast.If) if _within(loop, n)):
        if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)
                                            for n in ast.walk(node.test)):
            if any(method_call(c, "step") is not None and not _is_scheduler(a, method_call(c, "step"))
                   for c in calls_in(node)):
                conditional_step = True
                if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) for st in node.body for n in ast.walk(st)):
                    return  # the gradients are rescaled before the step (e.g. by 1 / tokens)
    if not conditional_step:
        return
    for c in calls_in(loop):
        receiver = method_call(c, "backward")
        if receiver is None:
            continue
        inner = c.args[0] if c.args else c.func.value   # accelerator.backward(loss) or loss.backward()
        if isinstance(inner, ast.Call) and method_call(inner, "scale") is not None and inner.args:
            inner = inner.args[0]   # scaler.scale(loss).backward()
        if _divided(a, inner, loop):
            return
        emit(c, "KBL011")
        return


def _divided(a: Analysis, expr, loop) -> bool:
    if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) for n in ast.walk(expr)):
        return True
    name = dotted(expr)
    if name is None:
        return True  # not a plain name: cannot tell, stay silent
    for node in _Index.of(ast.AugAssign, ast.Assign):
        if isinstance(node, ast.AugAssign) and dotted(node.target) == name and isinstance(node.op, ast.Div):
            return True
        if isinstance(node, ast.Assign) and any(dotted(t) == name for t in node.targets) and any(
                isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) for n in ast.walk(node.value)):
            return True
        if isinstance(node, ast.Assign) and any(dotted(t) == name for t in node.targets) and any(
                keyword(n, "reduction") is not None for n in ast.walk(node.value) if isinstance(n, ast.Call)):
            return True
    return False


def _straight_calls(block) -> list:
    """The calls a block runs in order, entering `with` blocks but not branches, loops or
    nested definitions (each of those is a block of its own)."""
    out = []
    for stmt in block:
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            out.extend(c for item in stmt.items for c in calls_in(item.context_expr))
            out.extend(_straight_calls(stmt.body))
        elif not isinstance(stmt, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.FunctionDef,
                                   ast.AsyncFunctionDef, ast.ClassDef)):
            out.extend(calls_in(stmt))
    return out


def _class_folder(a: Analysis, expr) -> bool:
    """Whether a dataset is visibly an ImageFolder/DatasetFolder: its samples are sorted by class."""
    value = a.values.get(dotted(expr) or "", expr)
    return isinstance(value, ast.Call) and (
        (a.imp.canon(value.func) or dotted(value.func) or "").rsplit(".", 1)[-1] in ("ImageFolder", "DatasetFolder"))


def _check_file_wide(a: Analysis, emit):
    calls = _Index.calls
    called = {c.func.attr for c in calls if isinstance(c.func, ast.Attribute)}
    # KBL008: a module attached to a model after an optimizer over its parameters was built
    optimizers = []
    for node in sorted(_Index.of(ast.Assign), key=lambda n: n.lineno):
        value = node.value
        if isinstance(value, ast.Call) and a._kind_of(value) == "optimizer" and value.args:
            params = value.args[0]
            owner = method_call(params, "parameters")
            if owner:
                optimizers.append((owner, node.lineno))
        for target in node.targets:
            if isinstance(target, ast.Attribute) and isinstance(value, ast.Call):
                owner = dotted(target.value)
                vname = a.imp.canon(value.func) or ""
                if owner and vname.startswith("torch.nn.") and vname.split(".")[-1][:1].isupper() and any(
                        o == owner and line < node.lineno for o, line in optimizers):
                    emit(node, "KBL008", model=owner)
    # KBL009: the training loader, not shuffled and without a sampler
    for node in _Index.of(ast.Assign):
        if isinstance(node.value, ast.Call) and a._kind_of(node.value) == "loader":
            name = (dotted(node.targets[0]) or "").lower()
            call = node.value
            if "train" not in name or keyword(call, "sampler") is not None or keyword(call, "batch_sampler") is not None:
                continue
            shuffle = keyword(call, "shuffle")
            if is_false(shuffle):
                emit(call, "KBL009", how="has shuffle=False")
            elif shuffle is None and len(call.args) < 3 and not any(k.arg is None for k in call.keywords) \
                    and call.args and _class_folder(a, call.args[0]):
                emit(call, "KBL009", how="over a class-folder dataset has no shuffle=True (the default is False)")
    # KBL012: clip after a scaled backward in the same block, with no unscale_ between
    holders = [a.tree] + _Index.of(ast.FunctionDef, ast.AsyncFunctionDef, ast.For, ast.AsyncFor, ast.While, ast.If,
                                   ast.With, ast.AsyncWith, ast.Try)
    for block in (getattr(n, f) for n in holders for f in ("body", "orelse") if isinstance(getattr(n, f, None), list)):
        scaled = False
        for c in _straight_calls(block):
            if method_call(c, "backward") is not None and isinstance(c.func.value, ast.Call) \
                    and method_call(c.func.value, "scale") is not None:
                scaled = True
            elif method_call(c, "unscale_") is not None:
                scaled = False
            elif scaled:
                name = a.imp.canon(c.func) or (c.func.attr if isinstance(c.func, ast.Attribute) else
                                               c.func.id if isinstance(c.func, ast.Name) else "")
                if name.split(".")[-1] in ("clip_grad_norm_", "clip_grad_value_"):
                    emit(c, "KBL012")
    # KBL014: DistributedSampler without set_epoch anywhere
    if "set_epoch" not in called:
        for c in calls:
            if (a.imp.canon(c.func) or "").endswith("DistributedSampler"):
                emit(c, "KBL014")
    # KBL016: parameters cast to float16, trained with an Adam-family optimizer
    def to_fp16(c):
        return (method_call(c, "half") is not None and not c.args) or (method_call(c, "to") is not None and any(
            a.imp.canon(arg) == "torch.float16" for arg in list(c.args) + [k.value for k in c.keywords]))
    casted = {method_call(c, "half", "to") for c in calls if to_fp16(c)} - {""}
    for node in _Index.of(ast.Assign):   # model = Net().cuda().half(): the name bound to the cast result
        if isinstance(node.value, ast.Call) and to_fp16(node.value):
            casted.update(dotted(t) for t in node.targets if dotted(t))
    if casted and not any((a.imp.canon(c.func) or "").endswith("autocast") for c in calls):
        for c in calls:
            name = a.imp.canon(c.func)
            if name in ADAM and c.args and method_call(c.args[0], "parameters") in casted:
                emit(c, "KBL016", opt=name.rsplit(".", 1)[-1])


CHECKS = (_check_loss_inputs, _check_loops, _check_file_wide)


# ---------------------------------------------------------------- running

def _noqa(lines: list, line: int, code: str) -> bool:
    """`# kb: noqa` (every rule) or `# kb: noqa[KBL001, KBL007]` on the finding's line."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    at = text.find("# kb: noqa")
    if at == -1:
        return False
    rest = text[at + len("# kb: noqa"):]
    if not rest.startswith("["):
        return True
    return code in {c.strip() for c in rest[1:rest.find("]")].split(",")}


def lint_source(text: str, path: str = "<string>", select=None, ignore=None) -> list:
    """Every finding in one file's source, sorted by line. Raises SyntaxError, also for code
    nested too deeply to parse or walk (the parser raises MemoryError, a walk RecursionError)."""
    try:
        try:
            tree = ast.parse(text, filename=path)
        except ValueError as exc:  # a null byte, before Python 3.12
            raise SyntaxError(str(exc), (path, 1, 1, None)) from None
        return _lint_tree(tree, text, path, select, ignore)
    except (RecursionError, MemoryError):
        raise SyntaxError("nested too deeply (Python cannot compile it either)", (path, 1, 1, None)) from None


def _lint_tree(tree, text: str, path: str, select, ignore) -> list:
    """lint_source on a parsed tree; the index of its nodes is cleared whatever happens."""
    _Index.build(tree)
    lines = text.splitlines()
    found = {}

    def emit(node, code, **fill):
        name, entry, message = RULES[code]
        if (select and not any(code.startswith(s) for s in select)) or (ignore and any(code.startswith(s) for s in ignore)):
            return
        if _noqa(lines, node.lineno, code):
            return
        key = (node.lineno, node.col_offset + 1, code)
        found.setdefault(key, Finding(path, node.lineno, node.col_offset + 1, code, message.format(**fill), entry))

    try:
        analysis = Analysis(tree, Imports(tree))
        for check in CHECKS:
            check(analysis, emit)
    finally:
        _Index.clear()
    return [found[k] for k in sorted(found)]


STDIN, STDIN_NAME = "-", "<stdin>"  # the path that reads a script from standard input, and its name in findings


def python_files(paths, stdin: bool = False) -> list:
    """The .py files named or found under folders (hidden folders and virtualenvs skipped);
    with `stdin`, `-` stays in the list and stands for standard input (the command line's
    convention; never in a server whose standard input is its protocol)."""
    out = []
    for path in paths:
        if stdin and path == STDIN:
            out.append(path)
        elif os.path.isdir(path):
            for top, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("__pycache__", "node_modules")
                                 and not os.path.exists(os.path.join(top, d, "pyvenv.cfg")))
                out.extend(os.path.join(top, f) for f in sorted(files) if f.endswith(".py"))
        elif os.path.exists(path):
            out.append(path)
        else:
            raise UsageError(f"{path}: no such file or folder")
    return out


def decode_python(data: bytes) -> str:
    """A file's text as Python reads it: a UTF-8 BOM or a `# -*- coding: ... -*-` line chooses the
    encoding, UTF-8 otherwise. Raises SyntaxError (an unknown or conflicting encoding) or
    UnicodeDecodeError, as Python would refuse to run the file."""
    from importlib.util import decode_source
    return decode_source(data)


def _read_script(name: str) -> bytes:
    """A script's bytes; a FIFO or a device is refused by its type, before anything opens it
    (opening a FIFO blocks until a writer comes). Raises OSError or ValueError (too large)."""
    if name == STDIN:  # a script piped in, as `cat train.py | kb lint -`
        data = sys.stdin.buffer.read(MAX_SOURCE_BYTES + 1)
        if len(data) > MAX_SOURCE_BYTES:
            raise ValueError(f"larger than {MAX_SOURCE_BYTES >> 20} MB; not a training script")
        return data
    import stat
    if not stat.S_ISREG(os.stat(name).st_mode):
        raise OSError("not a regular file")
    try:
        return read_regular(name, MAX_SOURCE_BYTES)  # checks the type again: it may have changed since
    except ValueError:
        raise ValueError(f"larger than {MAX_SOURCE_BYTES >> 20} MB; not a training script") from None


def lint_file(name: str, select=None, ignore=None) -> list:
    """The findings in one file (STDIN: standard input); a file that cannot be read or parsed is
    one UNLINTABLE finding, at the line Python names when it has one."""
    path = STDIN_NAME if name == STDIN else name
    unlintable = lambda line, col, why: [Finding(path, line or 1, col or 1, UNLINTABLE, why, None)]  # noqa: E731
    try:
        data = _read_script(name)
    except OSError as exc:
        return unlintable(1, 1, f"cannot read: {exc.strerror or exc}")
    except ValueError as exc:
        return unlintable(1, 1, f"cannot read: {exc}")
    try:
        return lint_source(decode_python(data), path, select, ignore)
    except UnicodeDecodeError as exc:
        return unlintable(1, 1, f"cannot parse: not UTF-8 text ({exc.reason} at byte {exc.start}) and no "
                                f"coding line names another encoding")
    except SyntaxError as exc:
        return unlintable(exc.lineno, exc.offset, f"cannot parse: {exc.msg}")


def lint_paths(paths, select=None, ignore=None, stdin: bool = False) -> list:
    """Findings for every Python file under `paths`; a file that cannot be read or parsed is an
    UNLINTABLE finding naming it (and the line), and the other files are still linted."""
    for code in list(select or []) + list(ignore or []):
        if not any(c.startswith(code) for c in RULES):
            raise UsageError(f"unknown rule code '{code}' (codes: {', '.join(RULES)})")
    return [f for name in python_files(paths, stdin) for f in lint_file(name, select, ignore)]


__all__ = ["RULES", "UNLINTABLE", "Finding", "lint_source", "lint_file", "lint_paths", "rules_for"]
