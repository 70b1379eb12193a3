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
from typing import NamedTuple

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
# Calls that return the module or tensor they are called on, for what it is: `Net().to(device)` is
# still a Net, `nn.CrossEntropyLoss().cuda()` still a loss, `probs.view(-1, C)` still probabilities.
SAME_MODULE = {"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "train", "requires_grad_", "type"}
SAME_VALUES = SAME_MODULE - {"train", "requires_grad_"} | {"view", "reshape", "contiguous", "squeeze", "unsqueeze",
                                                          "flatten", "permute", "transpose", "clone", "view_as", "resize",
                                                          "resize_as", "expand", "expand_as", "repeat", "narrow",
                                                          "reshape_as", "type_as"}
SAME_VALUE_FUNCTIONS = {f"torch.{n}" for n in ("squeeze", "unsqueeze", "flatten", "reshape", "transpose", "permute",
                                                "clone", "movedim", "swapaxes")}
# Optimizers and schedulers of common packages, known by their names: a name ending in one of these,
# imported from one of the packages, is an optimizer (or scheduler) like torch.optim's.
THIRD_PARTY = ("transformers", "timm", "apex", "bitsandbytes", "torch_optimizer", "deepspeed", "lion_pytorch",
               "pytorch_lamb", "fairseq", "adabelief_pytorch", "ranger", "schedulefree", "muon")
OPTIMIZER_NAMES = {"Adam", "AdamW", "SGD", "Adafactor", "Lamb", "LAMB", "FusedAdam", "FusedLAMB", "FusedSGD",
                   "FusedNovoGrad", "Adam8bit", "AdamW8bit", "PagedAdamW", "PagedAdamW8bit", "PagedAdam", "Lion",
                   "RAdam", "AdaBelief", "Ranger", "Lookahead", "NovoGrad", "AdamP", "SGDP", "Adan", "Lars", "LARS",
                   "AdamWScheduleFree", "SGDScheduleFree", "Muon", "DeepSpeedCPUAdam", "RMSprop", "Adagrad"}
OPTIMIZER_FACTORIES = {"create_optimizer", "create_optimizer_v2"}
SCHEDULER_FACTORIES = {"get_scheduler", "get_linear_schedule_with_warmup", "get_cosine_schedule_with_warmup",
                       "get_constant_schedule", "get_constant_schedule_with_warmup", "get_polynomial_decay_schedule_with_warmup",
                       "get_cosine_with_hard_restarts_schedule_with_warmup", "get_inverse_sqrt_schedule",
                       "get_wsd_schedule", "create_scheduler", "create_scheduler_v2", "CosineLRScheduler",
                       "StepLRScheduler", "PlateauLRScheduler", "TanhLRScheduler", "MultiStepLRScheduler",
                       "PolyLRScheduler", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle"}
# Method names that belong to torch objects (modules, tensors, optimizers): a call of one on a value of
# unknown type is never taken for a method of the same name defined in the file.
TORCH_METHODS = {"train", "eval", "step", "zero_grad", "backward", "forward", "parameters", "named_parameters",
                 "to", "cuda", "cpu", "item", "state_dict", "load_state_dict", "detach", "update", "scale",
                 "unscale_", "modules", "children", "apply", "half", "float", "size", "view", "reshape", "add",
                 "append", "extend", "format", "get", "items", "keys", "values", "sum", "mean", "pop", "copy",
                 "run", "start", "close", "save", "load", "log", "__call__", "__init__", "set_epoch", "register",
                 "add_param_group", "numpy", "tolist", "clone", "encode", "decode", "generate", "predict", "fit",
                 "reset", "init", "setup", "build", "write", "read", "print", "info", "warning", "debug", "add_scalar"}
WRAPPERS = {"DataParallel", "DistributedDataParallel", "FullyShardedDataParallel", "compile", "deepcopy"}
BACKWARD = ("backward", "manual_backward")   # loss.backward(), engine.backward(loss), Lightning's manual_backward
TRAINING_HOOKS = {"training_step"}           # Lightning calls these once per batch: each is a loop body
ZEROING_NAMES = {"reset_grad", "reset_grads", "clear_grad", "clear_grads", "zero_grads"}
NO_GRAD_CONTEXTS = {"torch.no_grad", "torch.inference_mode"}   # blocks that record no graph
EXPAND_DEPTH = 2   # how many levels of the file's own functions a loop's calls are followed into


# ---------------------------------------------------------------- names

class Imports:
    """What local names stand for: `nn` -> torch.nn, `CrossEntropyLoss` -> torch.nn.CrossEntropyLoss."""

    def __init__(self, nodes):
        """`nodes`: the file's import statements (or any nodes: the others are skipped)."""
        self.names = {}
        for node in nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.names[a.asname] = a.name
                    else:
                        self.names.setdefault(a.name.split(".")[0], a.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.names[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.ImportFrom) and node.level:   # from .engine import train, from . import engine
                for a in node.names:
                    self.names[a.asname or a.name] = f"{node.module}.{a.name}" if node.module else a.name

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


def unchain(expr, methods=SAME_MODULE):
    """`Net().to(device).half()` -> `Net()`: the expression under calls that return what they are called on."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in methods:
        expr = expr.func.value
    return expr


def unpack(target, value):
    """(target, value) pairs of one assignment: `a, b = x, y` pairs them up, `logits, probs = model(x)`
    gives each name its element of the call (as `model(x)[i]`), anything else is one pair."""
    if not isinstance(target, (ast.Tuple, ast.List)):
        return [(target, value)]
    if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
        return [pair for t, v in zip(target.elts, value.elts) for pair in unpack(t, v)]
    if isinstance(value, ast.Call) and not any(isinstance(t, ast.Starred) for t in target.elts):
        return [(t, ast.copy_location(ast.Subscript(value=value, slice=ast.Constant(i), ctx=ast.Load()), value))
                for i, t in enumerate(target.elts)]
    return []


def unwrap_copy(expr):
    """`copy.deepcopy(net)` -> `net`: a copy is the same kind of thing."""
    if isinstance(expr, ast.Call) and (dotted(expr.func) or "").rsplit(".", 1)[-1] in ("deepcopy", "copy") \
            and len(expr.args) == 1:
        return expr.args[0]
    return expr


class Act(str):
    """An activation's name ("softmax", "log_softmax", "sigmoid", "raw") that also remembers the call
    or module constructor applying it and the literal dim it was given (None when not a literal): it
    compares as the plain name, and a rule that cares over which axis can ask."""
    node: ast.AST | None
    dim: int | None

    def __new__(cls, name: str, node=None, dim=None):
        act = super().__new__(cls, name)
        act.node, act.dim = node, dim
        return act


def literal_dim(call, positional: int):
    """The int `dim` of a softmax-like call (keyword, or the argument at `positional`), or None
    when it is not a literal: `F.softmax(x, dim=-1)` -> -1, `x.softmax(0)` -> 0."""
    dim = keyword(call, "dim")
    if dim is None and len(call.args) > positional:
        dim = call.args[positional]
    if isinstance(dim, ast.UnaryOp) and isinstance(dim.op, ast.USub) and isinstance(dim.operand, ast.Constant):
        dim = ast.Constant(-dim.operand.value) if isinstance(dim.operand.value, int) else None
    if isinstance(dim, ast.Constant) and isinstance(dim.value, int) and not isinstance(dim.value, bool):
        return dim.value
    return None


def parameter_defaults(fn) -> dict:
    """A function's positional parameters that have a default, by name, in order:
    `def f(x, sampler=None)` -> {"sampler": <the None constant>}."""
    positional = fn.args.posonlyargs + fn.args.args
    return {p.arg: d for p, d in zip(positional[len(positional) - len(fn.args.defaults):], fn.args.defaults)}


def to_eval_mode(call) -> str | None:
    """The receiver a call puts in eval mode: `model.eval()`, or `model.train(False)` /
    `model.train(mode=False)` (eval mode under another name); None for any other call."""
    if method_call(call, "eval") is not None and not call.args:
        return method_call(call, "eval")
    if method_call(call, "train") is not None:
        arg = call.args[0] if call.args else keyword(call, "mode")
        if isinstance(arg, ast.Constant) and arg.value is False:
            return method_call(call, "train")
    return None


def keyword(call, name):
    return next((k.value for k in call.keywords if k.arg == name), None)


def is_false(expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is False


def within(node, inner) -> bool:
    """Whether `inner` lies inside `node`'s source span (everything lies inside a module)."""
    if isinstance(node, ast.Module) or isinstance(inner, ast.Module):
        return isinstance(node, ast.Module)
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
        ids = set()
        for node in ast.walk(tree):
            by_type.setdefault(type(node), []).append(node)
            ids.add(id(node))
        self.by_type = by_type
        self.ids = ids   # this file's nodes: a finding is reported only at one of them
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
            name = c.func.attr if isinstance(c.func, ast.Attribute) else c.func.id if isinstance(c.func, ast.Name) else ""
            if "zero_grad" in name or name in ZEROING_NAMES:   # zero_grad(), a zero_grad(params) helper
                return True
            if method_call(c, "zero_") is not None and isinstance(c.func.value, ast.Attribute) \
                    and c.func.value.attr == "grad":
                return True
        return any(within(node, n) for n in self.grad_assigns)

    def trains(self, node) -> bool:
        """Whether `node` holds a training step: a backward() call."""
        return any(method_call(n, *BACKWARD) is not None for n in self.calls_in(node))

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


class Definitions(NamedTuple):
    """The functions and classes one file defines."""
    functions: dict   # name -> [module-level or nested function], methods excluded
    methods: dict     # class name -> {method name -> method}
    owner: dict       # id(method) -> its class
    classes: dict     # class name -> class


class LoopScope:
    """One scope's loops: all of them, the ids of those nested in another, and the outermost ones.
    (Whether they zero gradients is Analysis.zeroes, which follows calls.)"""

    __slots__ = ("scope", "loops", "inner", "outer")

    def __init__(self, scope, loops, inner, outer):
        self.scope, self.loops, self.inner, self.outer = scope, loops, inner, outer


# ---------------------------------------------------------------- the analysis of one file

class Analysis:
    """The facts the rules read, gathered once per file."""

    def __init__(self, tree, project=None, source: str | None = None):
        self.tree = tree
        self.source = source     # the file's text when the caller has it (comments included)
        self.project = project   # the other files linted with this one (a Project), or None
        self.foreign = {}        # id(function of another file) -> that file's Analysis
        self.index = NodeIndex(tree)
        self.imp = Imports(sorted(self.index.of(ast.Import, ast.ImportFrom), key=lambda n: (n.lineno, n.col_offset)))
        self.kinds = {}          # dotted name -> "loss:ce" | "optimizer" | "scheduler" | "loader" | ...
        self.values = {}         # dotted name -> the expression it was last assigned (file order)
        self.history = {}        # dotted name -> [(end of the assignment, value, function holding it)], file order
        self.class_output = {}   # class name -> "softmax" | "log_softmax" | "sigmoid" | "raw" (what forward returns)
        self.keyed_output = {}   # dict key -> what a forward returns under it (`return {"exist": probs}`), None if two disagree
        self.class_loss = {}     # class name -> loss kind, for the file's loss classes that wrap a torch loss
        self.model_output = {}   # dotted name -> what calling it returns, as above
        self.assigned = {}       # id(call) -> the dotted name its result is assigned to
        self._read = False       # True once every assignment is read: kinds no longer change
        self._kind_cache: dict = {}     # id(call) -> kind_of(call), once _read
        self._factory_guard: set = set()  # the factory calls being resolved (a recursive factory stops)
        self._returns: dict = {}        # id(function) -> its return statements
        self._run_cache: dict = {}      # (id(node), depth) -> run_calls(node, depth)
        self._classes()
        self._assignments()
        self._loop_targets()
        self._arguments()
        self._propagate()
        self._functions()
        self._assigned_calls()
        self._read = True

    @cached_property
    def no_grad_blocks(self) -> list:
        """The `with torch.no_grad():` (or `torch.inference_mode()`) blocks of the file."""
        return [w for w in self.index.of(ast.With) if any(
            isinstance(i.context_expr, ast.Call) and (self.imp.canon(i.context_expr.func) or "") in NO_GRAD_CONTEXTS
            for i in w.items)]

    @cached_property
    def text(self) -> str:
        """The file's text, for rules that look for a word anywhere in it; unparsing the tree, the
        fallback, costs about as much as all the rules together on a long file."""
        return self.source if self.source is not None else ast.unparse(self.tree)

    # -- what an expression is
    def activation(self, expr, depth: int = 0) -> str | None:
        """"softmax", "log_softmax", "sigmoid" or "raw" when `expr` visibly produces one; None if unknown."""
        if depth > 6 or expr is None:
            return None
        if isinstance(expr, ast.Call):
            act = self._function_activation(expr)
            if act or isinstance(expr.func, ast.Call):
                return act or self._module_output(expr.func)   # nn.Softmax(dim=1)(x)
            canon = self.imp.canon(expr.func)
            if canon in ("torch.exp", "torch.log") and expr.args:   # exp(log_softmax) is a softmax, log(softmax) a log_softmax
                inner = self.activation(expr.args[0], depth + 1)
                turned = {("torch.exp", "log_softmax"): "softmax", ("torch.log", "softmax"): "log_softmax"}.get(
                    (canon, inner or ""))
                return Act(turned, getattr(inner, "node", None), getattr(inner, "dim", None)) if turned else None
            if canon in SAME_VALUE_FUNCTIONS and expr.args:
                return self.activation(expr.args[0], depth + 1)       # torch.squeeze(probs)
            if canon is None and isinstance(expr.func, ast.Attribute) and expr.func.attr in SAME_VALUES:
                return self.activation(expr.func.value, depth + 1)   # probs.view(-1, C)
            callee = dotted(expr.func)
            if callee is None:
                return None
            if callee in ("self", "self.forward"):   # a model's own method calling its forward
                cls = self._definitions.owner.get(id(self.enclosing(expr)))
                out = self.class_output.get(cls.name) if cls is not None else None
                return out if isinstance(out, str) else None
            out = self.model_output.get(callee) or self._module_output(self.values.get(callee))
            return out if isinstance(out, str) else None   # a model returning a tuple: see element()
        if isinstance(expr, ast.Subscript):
            index = expr.slice
            if isinstance(index, ast.Constant) and isinstance(index.value, str) and index.value in self.keyed_output:
                return self.keyed_output[index.value]   # output["exist"], a key some forward of the file returns
            if isinstance(expr.value, ast.Call) and isinstance(index, ast.Constant) and isinstance(index.value, int):
                outs = self.model_output.get(dotted(expr.value.func) or "")
                if isinstance(outs, tuple):   # logits, probs = model(x): the element the forward returns there
                    return outs[index.value] if -len(outs) <= index.value < len(outs) else None
            return self.activation(expr.value, depth + 1)   # probs[:, 1]
        name = dotted(expr)
        value = self.value_at(name, expr) if name is not None else None
        if value is not None and value is not expr:
            return self.activation(value, depth + 1)
        return None

    def value_at(self, name: str, where):
        """What `name` holds where it is read: its last assignment that ends before that point, in the
        same function if it is assigned there (`x = x.view(-1)` reads the x assigned before); else
        its last assignment in the file (an attribute set in __init__, a global)."""
        seen = self.history.get(name)
        if not seen:
            return self.values.get(name)
        here = (where.lineno, where.col_offset)
        fn = self.enclosing(where)
        before = [(end, value, holder) for end, value, holder in seen if end <= here]
        local = [v for end, v, holder in before if holder is fn]
        if local:
            return local[-1]
        if fn is not None and any(holder is fn for _, _, holder in seen):
            return None   # assigned in this function, but only after this point
        return before[-1][1] if before else self.values.get(name)

    @cached_property
    def _functions_by_start(self):
        functions = sorted(self.index.of(ast.FunctionDef, ast.AsyncFunctionDef), key=lambda f: (f.lineno, f.col_offset))
        return functions, [(f.lineno, f.col_offset) for f in functions]

    def _enclosing_of(self, node):
        """The innermost function of this file whose span holds `node`: of those starting before it,
        the last that still holds it."""
        functions, starts = self._functions_by_start
        for i in range(bisect_right(starts, (node.lineno, node.col_offset)) - 1, -1, -1):
            if within(functions[i], node):
                return functions[i]
        return None

    def _function_activation(self, call) -> str | None:
        """The activation a function or tensor method applies: torch.softmax(x), F.sigmoid(x), x.log_softmax()."""
        name = self.imp.canon(call.func)
        for group, act in ((SOFTMAX, "softmax"), (LOG_SOFTMAX, "log_softmax"), (SIGMOID, "sigmoid")):
            if name in group:
                return Act(act, call, literal_dim(call, 1))
        if name is None and isinstance(call.func, ast.Attribute) and call.func.attr in ("softmax", "log_softmax", "sigmoid") \
                and dotted(call.func.value) != "self":   # self.softmax(x) is a module attribute: see attrs
            return Act(call.func.attr, call, literal_dim(call, 0))
        return None

    def _module_output(self, module) -> str | None:
        """What a module built by the constructor call `module` returns: nn.Softmax -> "softmax",
        nn.Linear -> "raw", an nn.Sequential -> what its last layer returns; None if unknown."""
        if not isinstance(module, ast.Call):
            return None
        name = self.imp.canon(module.func)
        if name in MODULE_ACTS:
            return Act(MODULE_ACTS[name], module, literal_dim(module, 0))
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
            return LOSS_KINDS.get(self.imp.canon(call.func.func) or "", "other")   # nn.CrossEntropyLoss()(x, y)
        kind = self.kinds.get(dotted(call.func) or "")
        if kind and kind.startswith("loss:"):
            return kind[5:]
        fn = self.callee(call) if self._read else None
        return self.function_loss.get(id(fn)) if fn is not None else None   # def aux_loss(self, y_hat, y): ...

    @cached_property
    def function_loss(self) -> dict:
        """id(function) -> loss kind, for the file's functions and methods that return a torch loss of
        their first argument (`def auxiliary_loss(self, y_hat, y): return F.cross_entropy(y_hat, y)`), or
        compute one of it and return a value (`per_item = F.binary_cross_entropy_with_logits(logits, y,
        reduction="none"); return per_item.mean()`)."""
        out = {}
        for fn in self.index.of(ast.FunctionDef):
            params = [p.arg for p in fn.args.args]
            if params and params[0] in ("self", "cls"):
                params = params[1:]
            returns = self.returns(fn) if params else []
            if not any(ret.value is not None for ret in returns):
                continue
            returned = [ret.value for ret in returns if isinstance(ret.value, ast.Call)]
            for call in returned + [c for c in self.index.calls_in(fn) if c not in returned]:
                name = self.imp.canon(call.func)
                if name and torch_loss(name) and call.args and dotted(unchain(call.args[0], SAME_VALUES)) == params[0]:
                    out[id(fn)] = LOSS_KINDS.get(name, "other")
                    break
        return out

    def kind_of(self, value) -> str | None:
        """What a constructor call builds: "loss:<kind>", "optimizer", "scheduler", "loader",
        "sampler:distributed", "scaler"; None for anything else. Remembered once the file's
        assignments are all read (before that, what a name holds is still being learnt)."""
        if not isinstance(value, ast.Call):
            return None
        if self._read:
            if id(value) not in self._kind_cache:
                self._kind_cache[id(value)] = self._kind_of(value)
            return self._kind_cache[id(value)]
        return self._kind_of(value)

    def _kind_of(self, value) -> str | None:
        value = unchain(value)
        if not isinstance(value, ast.Call):   # criterion.cuda(): what the name already is
            return self.kinds.get(dotted(value) or "")
        name = self.imp.canon(value.func) or ""
        root, last = name.split(".")[0], name.rsplit(".", 1)[-1]
        if root in THIRD_PARTY and (last in OPTIMIZER_NAMES or last in OPTIMIZER_FACTORIES):
            return "optimizer"
        if root in THIRD_PARTY and last in SCHEDULER_FACTORIES:
            return "scheduler"
        if isinstance(value.func, ast.Name) and value.func.id in self.class_loss:
            return "loss:" + self.class_loss[value.func.id]
        made = self._made_by(value)
        if made is not None:
            return made
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

    def _made_by(self, call):
        """The kind a factory of this file returns (`def get_criterion(self): return nn.BCELoss()`),
        when every return of it builds the same kind; None otherwise."""
        guard = self._factory_guard
        fn = self.callee(call) if id(call) not in guard else None
        if fn is None:
            return None
        guard.add(id(call))
        try:
            kinds = {self.kind_of(r.value) for r in self.returns(fn)}
        finally:
            guard.discard(id(call))
        return kinds.pop() if len(kinds) == 1 else None

    def returns(self, fn) -> list:
        """The `return <value>` statements of a function (nested ones included), found once."""
        found = self._returns
        if id(fn) not in found:
            found[id(fn)] = [r for r in self.index.of(ast.Return) if r.value is not None and within(fn, r)]
        return found[id(fn)]

    def holds_any(self, expr, nodes_sorted_starts) -> bool:
        """Whether one of some nodes (given as their sorted (line, col) starts) starts inside `expr`."""
        lo = bisect_left(nodes_sorted_starts, (expr.lineno, expr.col_offset))
        return lo < len(nodes_sorted_starts) and nodes_sorted_starts[lo] <= (expr.end_lineno, expr.end_col_offset)

    def backpropagated(self, call):
        """The loss a backward() call backpropagates: `loss.backward()`, `accelerator.backward(loss)`,
        `scaler.scale(loss).backward()`, and apex's `with amp.scale_loss(loss, opt) as scaled:
        scaled.backward()` followed back to `loss`."""
        expr = call.args[0] if call.args else call.func.value
        if isinstance(expr, ast.Call) and method_call(expr, "scale") is not None and expr.args:
            expr = expr.args[0]
        name = dotted(expr)
        for node in self.index.of(ast.With, ast.AsyncWith) if name else []:
            for item in node.items:
                ctx = item.context_expr
                if dotted(item.optional_vars) == name and isinstance(ctx, ast.Call) \
                        and method_call(ctx, "scale_loss") is not None and ctx.args:
                    return ctx.args[0]
        return expr

    def is_scheduler(self, name: str) -> bool:
        return self.kinds.get(name) == "scheduler" or (self.kinds.get(name) is None and "sched" in name.lower())

    def optimizer_step(self, call) -> bool:
        """A `.step()` call that is not visibly a scheduler's."""
        receiver = method_call(call, "step")
        return receiver is not None and not self.is_scheduler(receiver)

    def optimizer_named(self, receiver: str) -> bool:
        """An optimizer (or GradScaler) by kind, or, when its kind is unknown (a parameter, an attribute
        set elsewhere), by a name that says optim and not sched: stricter than optimizer_step, which
        an RL loop's `env.step()` would pass."""
        return self.kinds.get(receiver) in ("optimizer", "scaler") or (
            self.kinds.get(receiver) is None and "optim" in receiver.lower() and not self.is_scheduler(receiver))

    def steps_optimizer(self, call) -> bool:
        """`x.step()` where x is optimizer_named."""
        receiver = method_call(call, "step")
        return receiver is not None and self.optimizer_named(receiver)

    def scheduler_tick(self, call):
        """The constructor call of the scheduler that a bare `sched.step()` ticks, when this file built
        it (`sched = StepLR(opt, ...)`); None for anything else, `step(epoch)` and `step(metric)` included."""
        receiver = method_call(call, "step")
        if receiver is None or call.args or call.keywords or self.kinds.get(receiver) != "scheduler":
            return None
        built = self.values.get(receiver)
        return built if isinstance(built, ast.Call) else None

    def innermost_loop(self, node):
        """The innermost for/while loop of `node`'s own function (or of the module) that holds it, or None."""
        fn = self.enclosing(node)
        around = [n for n in self.index.of(ast.For, ast.While) if self.enclosing(n) is fn and within(n, node)]
        return max(around, key=lambda n: (n.lineno, n.col_offset)) if around else None

    def computed_from(self, expr, depth: int = 2, attributes: bool = True) -> list:
        """Every node of `expr`, then of the values assigned to the names it reads, followed `depth`
        levels (`total = len(loader) * epochs; T_max=total` reaches the len() call): what a size or a
        condition is computed from, nearest first. attributes=False follows plain names only, not
        `args.x`, whose other assignments are often another quantity recomputed from it."""
        followed = (ast.Name, ast.Attribute) if attributes else ast.Name
        out, pending, seen = [], [(expr, 0)], set()
        while pending:
            node, level = pending.pop(0)
            for n in ast.walk(node):
                out.append(n)
                name = dotted(n) if isinstance(n, followed) and level < depth else None
                for _, value, _ in self.history.get(name or "", []):
                    if id(value) not in seen:
                        seen.add(id(value))
                        pending.append((value, level + 1))
        return out

    def steps_in(self, node, in_loop: bool, depth: int = 0) -> bool:
        """Whether `node` steps an optimizer (optimizer_named) inside one of its own loops (in_loop=True)
        or outside all of them, once per pass of `node` (in_loop=False). A call of the file's own
        function counts as what that function does, at the call's place (one level): a loop that calls
        `train_step()` steps once per pass; one that calls `train_one_epoch()` steps in an inner loop."""
        loops = [n for n in self.index.of(ast.For, ast.While) if n is not node and within(node, n)]
        for c in self.index.calls_in(node):
            looped = any(within(loop, c) for loop in loops)
            if self.steps_optimizer(c) and looped == in_loop:
                return True
            fn = self.callee(c) if depth < 1 else None
            if fn is None or fn is node:
                continue
            if looped and in_loop and (self.steps_in(fn, False, depth + 1) or self.steps_in(fn, True, depth + 1)):
                return True
            if not looped and self.steps_in(fn, in_loop, depth + 1):
                return True
        return False

    def sized_in_batches(self, expr) -> str | None:
        """The `len(loader)` an expression (a scheduler's size) is computed from, through names two
        levels (`total = len(train_loader) * epochs`), as written; None when none is seen."""
        for node in self.computed_from(expr):
            if isinstance(node, ast.Call) and dotted(node.func) == "len" and node.args:
                name = dotted(node.args[0]) or ""
                if self.kinds.get(name) == "loader" or "loader" in name.rsplit(".", 1)[-1].lower():
                    return ast.unparse(node)
        return None

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
            if getattr(scope, "name", None) in TRAINING_HOOKS:
                loops.insert(0, scope)   # the framework's loop runs it per batch
            if not loops:
                continue
            inner = {id(lp) for lp in loops if any(o is not lp and within(o, lp) for o in loops)}
            outer = [lp for lp in loops if id(lp) not in inner]
            out.append(LoopScope(scope, loops, inner, outer))
        return out

    # -- gathering
    def _classes(self):
        assigns = sorted(self.index.of(ast.Assign), key=lambda n: (n.lineno, n.col_offset))
        for cls in self.index.of(ast.ClassDef):
            attrs = {dotted(t): node.value for node in assigns if isinstance(node.value, ast.Call) and within(cls, node)
                     for t in node.targets if dotted(t)}
            forward = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "forward"), None)
            if forward is None:
                continue
            self._loss_wrapper(cls, forward)
            returns = self.returns(forward)
            if len(returns) != 1:
                continue
            local = {dotted(t): node.value for node in assigns if within(forward, node)   # source order: the last wins
                     and node.lineno < returns[0].lineno for t in node.targets if dotted(t)}
            self.class_output[cls.name] = self._returned(returns[0].value, local, attrs)
            returned = returns[0].value
            if isinstance(returned, ast.Name) and isinstance(local.get(returned.id), ast.Dict):
                returned = local[returned.id]
            if isinstance(returned, ast.Dict):   # return {"seg": seg, "exist": torch.sigmoid(h)}
                for key, value in zip(returned.keys, returned.values):
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        out = self._returned(value, local, attrs, 1)
                        seen = self.keyed_output.get(key.value, out)
                        self.keyed_output[key.value] = out if seen == out else None

    def _loss_wrapper(self, cls, forward):
        """A loss class of the file (a focal loss, a weighted BCE) whose forward hands its first input
        straight to a torch loss is that kind of loss: `FocalLoss()(logits, y)` is a BCE-with-logits."""
        params = [a.arg for a in forward.args.args[1:]]
        if not params:
            return
        for call in self.index.calls_in(forward):
            name = self.imp.canon(call.func) or ""
            if torch_loss(name) and call.args and dotted(unchain(call.args[0], SAME_VALUES)) == params[0]:
                self.class_loss[cls.name] = LOSS_KINDS.get(name, "other")
                return

    def _returned(self, expr, local, attrs, depth=0):
        """What a forward's returned expression is, following its local names and the modules on self."""
        if depth > 6:
            return None
        if isinstance(expr, ast.Tuple) and depth == 0:
            return tuple(self._returned(e, local, attrs, 1) for e in expr.elts)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in SAME_VALUES \
                and self.imp.canon(expr.func) is None:
            return self._returned(expr.func.value, local, attrs, depth + 1)   # self.act(h).squeeze()
        if isinstance(expr, ast.Call):
            module = attrs.get(dotted(expr.func) or "")
            built = self.built_model_output(module) if isinstance(module, ast.Call) else None
            return self._function_activation(expr) or self._module_output(module) or (
                built if isinstance(built, str) else None)   # self.head(x), head = a class of this file
        name = dotted(expr)
        if name in local and local[name] is not expr:
            return self._returned(local[name], local, attrs, depth + 1)
        return None

    def _assignments(self):
        nodes = sorted(self.index.of(ast.Assign, ast.AnnAssign), key=lambda n: (n.lineno, n.col_offset))
        for node in nodes:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is None:
                continue
            for target, value in (pair for t in targets for pair in unpack(t, node.value)):
                name = dotted(target)
                if name is not None:
                    self._bind(name, value, node)

    def _bind(self, name: str, value, statement=None):
        """What assigning `value` to `name` tells: its expression, its kind, what calling it returns."""
        self.values[name] = value
        if statement is not None:
            self.history.setdefault(name, []).append(
                ((statement.end_lineno, statement.end_col_offset), value, self._enclosing_of(statement)))
        kind = self.kind_of(value)
        output = self.built_model_output(value)
        if kind is None and output is None:   # model = build_model(args): what the factory returns
            kind, output = self._factory_result(value)
        if kind:
            self.kinds[name] = kind
        if output is not None:
            self.model_output[name] = output

    def _factory_result(self, value):
        """(kind, model output) of what a function of the file returns, when `value` calls one and
        every `return` of it builds the same kind (`def get_criterion(args): return
        nn.CrossEntropyLoss(...)`) or the same model (`net = Net(n); return net.to(device)`)."""
        call = unchain(value)
        if not isinstance(call, ast.Call):
            return None, None
        if isinstance(call.func, ast.Name):
            found = self._definitions.functions.get(call.func.id, [])
            fn = found[0] if len(found) == 1 else None
        elif isinstance(call.func, ast.Attribute) and dotted(call.func.value) == "self":
            fn = self.callee(call)   # self.model = self.build_model()
        else:
            fn = None
        if fn is None or id(fn) in self.foreign:
            return None, None
        built = []
        for ret in self.returns(fn):
            expr = unchain(ret.value)
            name = dotted(expr)
            if name is not None:
                local = [v for _, v, holder in self.history.get(name, []) if holder is fn]
                expr = unchain(local[-1]) if local else None
            if not isinstance(expr, ast.Call) or expr is call:
                return None, None
            built.append((self.kind_of(expr), self.built_model_output(expr)))
        if not built or len(set(k for k, _ in built)) != 1 or len({repr(o) for _, o in built}) != 1:
            return None, None
        return built[0]

    def built_model_output(self, value):
        """What a model built by `value` returns when called: a class of this file (`Net().to(device)`,
        `nn.DataParallel(Net())`), an nn.Sequential, or a name already known to be one; None if unknown."""
        value = unchain(value)
        if isinstance(value, ast.Call) and (self.imp.canon(value.func) or "").rsplit(".", 1)[-1] in WRAPPERS \
                and value.args:
            return self.built_model_output(value.args[0])
        if not isinstance(value, ast.Call):
            return self.model_output.get(dotted(value) or "")
        cname = value.func.id if isinstance(value.func, ast.Name) else None
        if cname in self.class_output:
            return self.class_output[cname]
        if self.imp.canon(value.func) == "torch.nn.Sequential":
            return self._module_output(value)
        return self._composed_output(value)

    def _composed_output(self, call):
        """A model composed by a class from elsewhere out of parts of this file (`CombinedModel(gnn, head)`)
        returns what its last part returns, when that part's output is known: parts run in the order given."""
        name = call.func.id if isinstance(call.func, ast.Name) else call.func.attr if isinstance(
            call.func, ast.Attribute) else ""
        if not name[:1].isupper() or name in self._definitions.classes or len(call.args) < 2 \
                or (self.imp.canon(call.func) or "").startswith("torch."):
            return None
        last = self.built_model_output(call.args[-1])
        return last if isinstance(last, str) and last != "raw" else None

    # -- the file's own functions: who calls them with what, and what a call to one runs
    @cached_property
    def _definitions(self) -> "Definitions":
        """The file's functions by name, methods by class and name, the class of each method, classes by name."""
        functions, methods, owner, classes = {}, {}, {}, {}
        for cls in self.index.of(ast.ClassDef):
            classes[cls.name] = cls
            for fn in cls.body:
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    methods.setdefault(cls.name, {})[fn.name] = fn
                    owner[id(fn)] = cls
        for fn in self.index.of(ast.FunctionDef, ast.AsyncFunctionDef):
            if id(fn) not in owner:
                functions.setdefault(fn.name, []).append(fn)
        return Definitions(functions, methods, owner, classes)

    @cached_property
    def _enclosing(self):
        """id(node) -> the function that holds it, for every call (to resolve `self.method()`)."""
        out = {}
        for fn in sorted(self.index.of(ast.FunctionDef, ast.AsyncFunctionDef), key=lambda f: f.lineno):
            for c in self.index.calls_in(fn):
                out[id(c)] = fn   # nested functions come later and win: the innermost holder
        return out

    def _method(self, cls_name: str, name: str, seen=()):
        """A method of a class of this file, looked up through the bases defined here too."""
        functions, methods, owner, classes = self._definitions
        if name in methods.get(cls_name, {}):
            return methods[cls_name][name]
        cls = classes.get(cls_name)
        for base in getattr(cls, "bases", []):
            if isinstance(base, ast.Name) and base.id not in seen and base.id != cls_name:
                found = self._method(base.id, name, seen + (cls_name,))
                if found is not None:
                    return found
        return None

    def enclosing(self, node):
        """The innermost function of this file that holds a node, or None at module level."""
        if isinstance(node, ast.Call):
            return self._enclosing.get(id(node))
        return self._enclosing_of(node)

    def callee(self, call):
        """The function or method of this file that `call` runs, when that can be seen: `f(...)` (one
        function of that name), `self.m(...)` (the enclosing class or its bases), `obj.m(...)` or
        `Cls(...).m(...)` (obj built from a class of the file, or `m` defined by one class only and not
        a torch method name)."""
        functions, methods, owner, classes = self._definitions
        func = call.func
        if isinstance(func, ast.Name):
            found = functions.get(func.id, [])
            return found[0] if len(found) == 1 else self._imported(func) if not found else None
        if not isinstance(func, ast.Attribute):
            return None
        if self.project is not None and isinstance(func.value, ast.Name) and func.value.id in self.imp.names \
                and func.value.id not in self.values:
            return self._imported(func)   # engine.train_one_epoch(...), tnt.train(...)
        receiver = dotted(func.value)
        if receiver in ("self", "cls"):
            fn = self._enclosing.get(id(call))
            cls = owner.get(id(fn)) if fn is not None else None
            return self._method(cls.name, func.attr) if cls is not None else None
        built = unchain(self.values.get(receiver or "")) if receiver else unchain(func.value)  # Trainer(cfg).fit(...)
        if isinstance(built, ast.Call) and isinstance(built.func, ast.Name) and built.func.id in classes:
            return self._method(built.func.id, func.attr)
        if func.attr in TORCH_METHODS:
            return None
        found = [m[func.attr] for m in methods.values() if func.attr in m]
        return found[0] if len(found) == 1 else None

    def _imported(self, func):
        """A function of another file linted together with this one, imported here by name or by module."""
        if self.project is None:
            return None
        name = self.imp.canon(func)
        if not name or "." not in name:
            return None
        module, attr = name.rsplit(".", 1)
        found = self.project.function(module, attr)
        if found is None:
            return None
        analysis, fn = found
        self.foreign[id(fn)] = analysis
        return fn

    def owner_of(self, fn) -> "Analysis":
        """The Analysis of the file a function belongs to: this one, or another of the project."""
        return self.foreign.get(id(fn), self)

    def run_calls(self, node, depth: int = EXPAND_DEPTH) -> list:
        """The calls `node` runs, in order, with the calls of the file's own functions it calls spliced in
        after each such call (`depth` levels): a loop that calls `train_step()` runs its backward()."""
        key = (id(node), depth)
        cache = self._run_cache
        if key in cache:
            return cache[key]
        cache[key] = []   # a recursive function: its own call adds nothing
        out, pending = [], []
        for c in self.index.calls_in(node):
            start = (c.lineno, c.col_offset)
            while pending and pending[-1][0] <= start:
                out.extend(pending.pop()[1])
            out.append(c)
            fn = self.callee(c) if depth else None
            if fn is not None and (id(fn) in self.foreign or not within(fn, node)):
                pending.append(((c.end_lineno, c.end_col_offset), self.owner_of(fn).run_calls(fn, depth - 1)))
        while pending:
            out.extend(pending.pop()[1])
        cache[key] = out
        return out

    def reached(self, node, depth: int = EXPAND_DEPTH) -> list:
        """The functions (of this file, or of another file of the project) a node runs through its
        calls, `depth` levels."""
        out: list = []
        if depth <= 0:
            return out
        for c in self.index.calls_in(node):
            fn = self.callee(c)
            if fn is None or fn in out or (id(fn) not in self.foreign and within(fn, node)):
                continue
            out.append(fn)
            out.extend(f for f in self.owner_of(fn).reached(fn, depth - 1) if f not in out)
        return out

    def trains(self, node) -> bool:
        """Whether `node` runs a training step: a backward() call, here or in a function it calls."""
        return any(method_call(c, *BACKWARD) is not None for c in self.run_calls(node))

    def zeroes(self, node) -> bool:
        """Whether `node` zeroes gradients, here or in a function it calls."""
        return self.index.zeroes(node) or any(self.owner_of(fn).index.zeroes(fn) for fn in self.reached(node))

    def periodic(self, test) -> bool:
        """Whether an `if` test is visibly periodic: `step % N == 0`, or a name assigned from one
        (`do_step = (i + 1) % accum == 0; if do_step:`)."""
        def has_mod(expr):
            return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(expr))
        if has_mod(test):
            return True
        names = [dotted(n) for n in ast.walk(test) if isinstance(n, (ast.Name, ast.Attribute))]
        return any(name in self.values and has_mod(self.values[name]) for name in names if name)

    def periodic_steps(self, loop) -> list:
        """The periodic `if` blocks of a loop that step an optimizer (gradient accumulation's boundary,
        or the generator step of an n_critic loop)."""
        return [n for n in self.index.of(ast.If) if within(loop, n) and self.periodic(n.test)
                and any(self.optimizer_step(c) for c in self.index.calls_in(n))]

    def accumulation(self, loop):
        """(the periodic step blocks, the loop's calls outside them) when the loop accumulates gradients:
        every step is under a periodic `if` and a backward() runs outside it on every pass; None for a
        loop that also steps on every pass (a critic each iteration, a generator every n_critic)."""
        periodic = self.periodic_steps(loop)
        if not periodic:
            return None
        outside = [c for c in self.index.calls_in(loop) if not any(within(n, c) for n in periodic)]
        if any(self.optimizer_step(c) for c in outside) or not any(method_call(c, *BACKWARD) is not None
                                                                   for c in outside):
            return None
        return periodic, outside

    def manual_update(self, node) -> bool:
        """Whether `node` (or a function it calls) updates weights by hand from their gradients:
        `p.data -= lr * p.grad`, `w -= lr * w.grad`, `p.data.add_(p.grad, alpha=-lr)`."""
        def reads_grad(expr):
            return any(isinstance(n, ast.Attribute) and n.attr == "grad" for n in ast.walk(expr))
        for holder in [node] + self.reached(node):
            for n in ast.walk(holder):
                if isinstance(n, ast.AugAssign) and isinstance(n.op, (ast.Sub, ast.Add)) and reads_grad(n.value):
                    return True
                if isinstance(n, ast.Call) and method_call(n, "add_", "sub_") is not None and \
                        any(reads_grad(arg) for arg in n.args):
                    return True
        return False

    def optimizer_owner(self, name: str) -> str | None:
        """The model whose parameters an optimizer was built on: `Adam(netD.parameters())` -> "netD"."""
        value = self.values.get(name)
        owners = self.parameter_owners(value) if isinstance(value, ast.Call) else []
        return owners[0] if owners else None

    def parameter_owners(self, optimizer_call) -> list:
        """The models whose parameters an optimizer call is given, in order: `Adam(model.parameters())`,
        and through `filter(...)`, `list(...)`, comprehensions, param-group dicts and the names they are
        bound to (`groups = [{"params": [p for n, p in model.named_parameters() if ...]}]; AdamW(groups)`)."""
        if not isinstance(optimizer_call, ast.Call):
            return []
        given = optimizer_call.args[0] if optimizer_call.args else keyword(optimizer_call, "params")
        owners: list = []
        pending, seen = [given], set()
        while pending and len(seen) < 16:
            expr = pending.pop(0)
            if expr is None or id(expr) in seen:
                continue
            seen.add(id(expr))
            bound_here = {n.id for c in ast.walk(expr) if isinstance(c, ast.comprehension)
                          for n in ast.walk(c.target) if isinstance(n, ast.Name)}   # `p` of `for n, p in ...`
            for node in ast.walk(expr):
                owner = method_call(node, "parameters", "named_parameters") if isinstance(node, ast.Call) else None
                if owner and owner not in owners:
                    owners.append(owner)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound_here:
                    pending.append(self.value_at(node.id, node))
        return owners

    def _arguments(self):
        """A parameter of a function of this file takes what its callers pass: when every call seen
        passes the same model, optimizer or loss (`train(model, optimizer)`, or a class's `__init__`
        through `Trainer(model, criterion, optimizer)`), the parameter is that."""
        passed = {}
        for call in self.index.calls:
            fn = self.called_function(call)
            if fn is None or call.func is None:
                continue
            for name, arg in self.bound_arguments(call, fn).items():
                passed.setdefault((id(fn), name), []).append(arg)
        for (_, name), args in passed.items():
            if name in self.values or name in self.kinds or name in self.model_output:
                continue   # the name is assigned in this file: what it holds there is known already
            names = {dotted(unwrap_copy(unchain(a))) for a in args}
            if len(names) == 1 and None not in names:
                source = names.pop()
                for table in (self.values, self.kinds, self.model_output):
                    if source in table:
                        table[name] = table[source]
            elif len(args) == 1 and isinstance(args[0], ast.Call):
                self._bind(name, args[0])
        for fn in self.index.of(ast.FunctionDef, ast.AsyncFunctionDef):   # `loss=nn.CrossEntropyLoss()` defaults
            for param, default in parameter_defaults(fn).items():
                assigned_here = any(holder is fn for _, _, holder in self.history.get(param, []))
                if isinstance(default, ast.Call) and (id(fn), param) not in passed and not assigned_here \
                        and param not in self.kinds and self.kind_of(default):
                    self._bind(param, default)

    def called_function(self, call):
        """The function of the file a call runs (`callee`), or a class's `__init__` for a constructor
        call of a class of the file (`Trainer(model, criterion, optimizer)`)."""
        fn = self.callee(call)
        if fn is None and isinstance(call.func, ast.Name) and call.func.id in self._definitions.classes:
            fn = self._method(call.func.id, "__init__")
        return fn

    def bound_arguments(self, call, fn) -> dict:
        """Parameter name -> the expression `call` passes to it (positional or keyword; a method's
        self/cls left out, a `*args` spread not followed)."""
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        if id(fn) in self.owner_of(fn)._definitions.owner and params and params[0] in ("self", "cls"):
            params = params[1:]
        bound = list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg in params]
        return {name: arg for name, arg in bound if not isinstance(arg, ast.Starred)}

    def cli_default(self, expr):
        """The default of the command-line option `expr` reads (`args.shuffle`, `cfg.use_ema`) when the
        file declares it with add_argument: its `default=` constant, False for a bare store_true, True
        for a bare store_false; None when the option is not declared here or its default is not a constant."""
        if not isinstance(expr, ast.Attribute):
            return None
        for call in self.index.calls:
            if not (isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument" and call.args):
                continue
            flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            dest = keyword(call, "dest")
            names = {dest.value} if isinstance(dest, ast.Constant) else {
                f.lstrip("-").replace("-", "_") for f in flags if f.startswith("--")}
            if expr.attr not in names:
                continue
            default, action = keyword(call, "default"), keyword(call, "action")
            if isinstance(default, ast.Constant):
                return default
            if default is None and isinstance(action, ast.Constant) and action.value in ("store_true", "store_false"):
                return ast.Constant(action.value == "store_false")
            return None
        return None

    def assigned_within(self, name: str, node) -> bool:
        """Whether an assignment to `name` (or a loop binding it) ends inside `node`."""
        start, end = (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)
        return any(start <= at <= end for at, _, _ in self.history.get(name, []))

    def _propagate(self):
        """`self.loss = loss` where the parameter `loss` became known only from its callers or its default:
        the attribute is what the parameter is."""
        for name, value in list(self.values.items()):
            source = dotted(unchain(value)) if isinstance(value, (ast.Name, ast.Attribute, ast.Call)) else None
            if not source or source == name:
                continue
            if name not in self.kinds and source in self.kinds:
                self.kinds[name] = self.kinds[source]
            if name not in self.model_output and source in self.model_output:
                self.model_output[name] = self.model_output[source]

    def _loop_targets(self):
        """`for out in outputs:` reads an element of outputs: what outputs holds, out holds too (a softmax
        of a batch is a softmax row by row); `enumerate(...)` and `zip(...)` are looked through."""
        for loop in sorted(self.index.of(ast.For, ast.AsyncFor), key=lambda n: (n.lineno, n.col_offset)):
            target, it = loop.target, loop.iter
            if isinstance(it, ast.Call) and dotted(it.func) == "enumerate" and it.args and \
                    isinstance(target, ast.Tuple) and len(target.elts) == 2:
                target, it = target.elts[1], it.args[0]
            name = dotted(target)
            if name and dotted(it):
                element = ast.copy_location(ast.Subscript(value=it, slice=ast.Slice(), ctx=ast.Load()), it)
                self._bind(name, element, target)

    def _functions(self):
        """A plain function of the file that returns what models return (`def D(x): return D_gan(h),
        D_aux(h)`) is called like one: its name gets that output, a tuple for a tuple."""
        for fn in self.index.of(ast.FunctionDef):
            if fn.name in self.values or id(fn) in self._definitions.owner:
                continue   # a method, or a name also assigned: not plainly this function
            returns = self.returns(fn)
            if len(returns) != 1:
                continue
            local = {dotted(t): node.value for node in sorted(self.index.of(ast.Assign), key=lambda n: n.lineno)
                     if within(fn, node) for t in node.targets if dotted(t)}
            out = self._returned(returns[0].value, local, self.values)
            if out is not None and out != (None,) * (len(out) if isinstance(out, tuple) else 0):
                self.model_output.setdefault(fn.name, out)

    def _assigned_calls(self):
        """Which name each constructor call is bound to (a sampler named val_sampler, a loader named
        train_loader)."""
        for node in self.index.of(ast.Assign):
            values = [node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp) else [node.value]
            for value in values:   # x = Sampler(...) if distributed else None: x names the call too
                if isinstance(value, ast.Call) and dotted(node.targets[0]):
                    self.assigned[id(value)] = dotted(node.targets[0])


class Project:
    """The files of a package linted together (`kb lint src/`): a call into another of them, imported by
    name or by module, is followed like a call into the file's own functions. Files are parsed when
    first needed; one that cannot be parsed is simply not followed."""

    def __init__(self, files: dict):
        """`files`: module name (`engine`, `util.misc`) -> source text; an ambiguous name is left out."""
        self.files = files
        self._analyses: dict = {}

    def analysis(self, module: str):
        if module not in self._analyses:
            self._analyses[module] = None   # while it is built, a call back into it is not followed
            try:
                self._analyses[module] = Analysis(ast.parse(self.files[module]), project=self, source=self.files[module]) \
                    if module in self.files else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self._analyses[module] = None
        return self._analyses[module]

    def function(self, module: str, name: str):
        """(Analysis, function) for a module-level function of a project file, or None."""
        for candidate in (module, module.rsplit(".", 1)[-1]):
            analysis = self.analysis(candidate) if candidate in self.files else None
            if analysis is not None:
                found = analysis._definitions.functions.get(name, [])
                return (analysis, found[0]) if len(found) == 1 else None
        return None
