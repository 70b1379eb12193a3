"""The facts lint rules read, gathered once per file: what names stand for, what a name was last
assigned, which calls a node holds, the training loops of each scope.

A rule (kb_tools/lint/rules/) receives one `Analysis` and reads it; it never walks the tree for
what is gathered here. Everything is per file and per call of `Analysis`: two files linted at
once (threads, an MCP server) never share state.
"""
from __future__ import annotations

import ast
from bisect import bisect_left, bisect_right
from functools import cached_property

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
LOOPS = (ast.For, ast.While, ast.AsyncFor)


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


def keyword(call, name):
    return next((k.value for k in call.keywords if k.arg == name), None)


def is_false(expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is False


def within(node, inner) -> bool:
    """Whether `inner` lies inside `node`'s source span."""
    return (node.lineno, node.col_offset) <= (inner.lineno, inner.col_offset) and \
        (inner.end_lineno, inner.end_col_offset) <= (node.end_lineno, node.end_col_offset)


def torch_loss(name: str) -> bool:
    """torch.nn.XLoss classes and torch.nn.functional losses (mse_loss, cross_entropy, ...)."""
    if name.startswith("torch.nn.functional."):
        short = name.rsplit(".", 1)[-1]
        return short.endswith("_loss") or short in ("cross_entropy", "binary_cross_entropy",
                                                    "binary_cross_entropy_with_logits", "kl_div")
    return name.startswith("torch.nn.") and name.count(".") == 2 and name.endswith("Loss")


# ---------------------------------------------------------------- the nodes of one file

class NodeIndex:
    """Every node of one file, gathered in one walk: the calls in source order (a node's calls are
    a slice found by position, not another walk), and nodes by type."""

    def __init__(self, tree):
        self.tree = tree
        by_type = {}
        for node in ast.walk(tree):
            by_type.setdefault(type(node), []).append(node)
        self.by_type = by_type
        self.calls = sorted(by_type.get(ast.Call, []), key=lambda n: (n.lineno, n.col_offset))
        self.starts = [(n.lineno, n.col_offset) for n in self.calls]

    def of(self, *types) -> list:
        return [n for t in types for n in self.by_type.get(t, [])]

    def calls_in(self, node) -> list:
        """Every call inside `node` (itself included), in source order."""
        if isinstance(node, ast.Module):
            return self.calls
        lo = bisect_left(self.starts, (node.lineno, node.col_offset))
        hi = bisect_right(self.starts, (node.end_lineno, node.end_col_offset))
        return [c for c in self.calls[lo:hi] if within(node, c)]

    @cached_property
    def grad_assigns(self) -> list:
        return [n for n in self.of(ast.Assign) if any(isinstance(t, ast.Attribute) and t.attr == "grad" for t in n.targets)]

    def zeroes(self, node) -> bool:
        """Whether `node` zeroes gradients: zero_grad(), `p.grad = None` or `p.grad.zero_()`."""
        for c in self.calls_in(node):
            if method_call(c, "zero_grad") is not None:
                return True
            if method_call(c, "zero_") is not None and isinstance(c.func.value, ast.Attribute) \
                    and c.func.value.attr == "grad":
                return True
        return any(within(node, n) for n in self.grad_assigns)

    def trains(self, node) -> bool:
        """Whether `node` holds a training step: a backward() call."""
        return any(method_call(n, "backward") is not None for n in self.calls_in(node))

    def scopes(self):
        """The module body and every function, each analysed as its own scope."""
        yield self.tree
        yield from self.of(ast.FunctionDef, ast.AsyncFunctionDef)


def own_statements(scope) -> list:
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


class LoopScope:
    """One scope's loops: all of them, the ids of those nested in another, the outermost ones, and
    whether the scope zeroes gradients anywhere (itself or through a helper defined in the file)."""

    __slots__ = ("scope", "loops", "inner", "outer", "zeroes")

    def __init__(self, scope, loops, inner, outer, zeroes):
        self.scope, self.loops, self.inner, self.outer, self.zeroes = scope, loops, inner, outer, zeroes


# ---------------------------------------------------------------- the analysis of one file

class Analysis:
    """The facts the rules read, gathered once per file."""

    def __init__(self, tree):
        self.tree = tree
        self.index = NodeIndex(tree)
        self.imp = Imports(tree)
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
        if name is not None and torch_loss(name):
            return LOSS_KINDS.get(name, "other")
        if isinstance(call.func, ast.Call) and torch_loss(self.imp.canon(call.func.func) or ""):
            return LOSS_KINDS.get(self.imp.canon(call.func.func), "other")   # nn.CrossEntropyLoss()(x, y)
        kind = self.kinds.get(dotted(call.func) or "")
        return kind[5:] if kind and kind.startswith("loss:") else None

    def kind_of(self, value) -> str | None:
        """What a constructor call builds: "loss:<kind>", "optimizer", "scheduler", "loader",
        "sampler:distributed", "scaler"; None for anything else."""
        if not isinstance(value, ast.Call):
            return None
        name = self.imp.canon(value.func) or ""
        if torch_loss(name) and name.split(".")[-1][0].isupper():
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

    def is_scheduler(self, name: str) -> bool:
        return self.kinds.get(name) == "scheduler" or (self.kinds.get(name) is None and "sched" in name.lower())

    def optimizer_step(self, call) -> bool:
        """A `.step()` call that is not visibly a scheduler's."""
        receiver = method_call(call, "step")
        return receiver is not None and not self.is_scheduler(receiver)

    @cached_property
    def loss_calls(self) -> list:
        """(call, loss kind) for every call that computes a torch loss on at least one argument."""
        out = []
        for call in self.index.calls:
            kind = self.loss_kind(call)
            if kind is not None and call.args:
                out.append((call, kind))
        return out

    @cached_property
    def loop_scopes(self) -> list:
        """A LoopScope for every scope (the module, each function) that holds a loop."""
        out = []
        for scope in self.index.scopes():
            own = own_statements(scope)
            loops = [n for n in own if isinstance(n, LOOPS)]
            if not loops:
                continue
            inner = {id(lp) for lp in loops if any(o is not lp and within(o, lp) for o in loops)}
            outer = [lp for lp in loops if id(lp) not in inner]
            zeroes = any(self.index.zeroes(st) for st in getattr(scope, "body", [])) or any(
                isinstance(c.func, ast.Name) and c.func.id in self.zeroers for st in own for c in self.index.calls_in(st))
            out.append(LoopScope(scope, loops, inner, outer, zeroes))
        return out

    # -- gathering
    def _classes(self):
        for cls in self.index.of(ast.ClassDef):
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
        nodes = sorted(self.index.of(ast.Assign, ast.AnnAssign), key=lambda n: (n.lineno, n.col_offset))
        for node in nodes:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            for target in targets:
                name = dotted(target)
                if name is None or value is None:
                    continue
                self.values[name] = value
                kind = self.kind_of(value)
                if kind:
                    self.kinds[name] = kind
                if isinstance(value, ast.Call):
                    cname = value.func.id if isinstance(value.func, ast.Name) else None
                    if cname in self.class_output:
                        self.model_output[name] = self.class_output[cname]
                    elif self.imp.canon(value.func) == "torch.nn.Sequential":
                        self.model_output[name] = self._module_output(value)

    def _evaluators(self):
        for node in self.index.of(ast.Assign):
            if isinstance(node.value, ast.Call) and dotted(node.targets[0]):
                self.assigned[id(node.value)] = dotted(node.targets[0])
        for fn in self.index.of(ast.FunctionDef, ast.AsyncFunctionDef):
            names = [n.func.attr for n in self.index.calls_in(fn) if isinstance(n.func, ast.Attribute)]
            if "eval" in names and "train" not in names and not self.index.trains(fn):
                self.evaluators.add(fn.name)
            if self.index.zeroes(fn):
                self.zeroers.add(fn.name)
