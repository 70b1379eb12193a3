"""What it finds: parameters an optimizer's hand-built groups leave out. A param-group dict
(`{"params": [], "lr": ...}`) that is filled (`group["params"].append(p)`) and then never read
again, so it never reaches the optimizer; and groups gathered from `named_modules()` by each
module's `.weight` and `.bias` only, in a file whose own module class keeps a learnable
`nn.Parameter` under another name (fusion weights, a temperature, a scale), which no group holds;
and optimizers built over some parts of a model of the file (`Adam(net.actor.parameters())`,
`AdamW(self.diffusion_model.parameters())` in `configure_optimizers`) while another part the
model's class (or a subclass) builds from fresh torch layers in `__init__` and uses is in none of
them (a shared feature extractor, a new projector). A part that is frozen, loaded from weights,
named as a target/EMA/teacher copy, or in a file that loads weights at all, is left alone.

Why it hurts training: the optimizer updates exactly the tensors it was given. The left-out
parameters get gradients on every backward but never change: the layers they belong to stay at
their initial values (a random classifier, BiFPN fusion weights stuck at 1) and nothing errors.

Example:
    head = {"params": [], "lr": 5e-2}
    for name, p in model.named_parameters():
        if name.startswith("fc"):
            head["params"].append(p)
    opt = torch.optim.AdamW(groups)         # `head` was never appended to groups

Use instead:
    groups.append(head)
    opt = torch.optim.AdamW(groups)
"""
import ast

from kb_tools.lint.analysis import dotted, own_statements, torch_loss, unchain

CODE, NAME, ENTRY = "KBL022", "parameters-left-out-of-groups", "params-not-in-optimizer"
MESSAGE = "{what}"
DROPPED = ("the param group {name} is filled here but never read after: it never reaches the optimizer, so its "
           "parameters get gradients and never change")
WEIGHT_BIAS = ("the optimizer's groups take each module's .weight and .bias only; {cls}.{attr} is an nn.Parameter "
               "under another name, so no group holds it and it never changes")


def _group_dict(value) -> bool:
    return isinstance(value, ast.Dict) and any(
        isinstance(k, ast.Constant) and k.value == "params" for k in value.keys)


def _fill(load, parents) -> bool:
    """`name["params"].append(p)` / `.extend(ps)` / `name["params"] += ps`: a read that only adds to it."""
    sub = parents.get(id(load))
    if not (isinstance(sub, ast.Subscript) and sub.value is load):
        return False
    attr = parents.get(id(sub))
    if isinstance(attr, ast.Attribute) and attr.attr in ("append", "extend"):
        return isinstance(parents.get(id(attr)), ast.Call)
    return isinstance(attr, ast.AugAssign) and attr.target is sub


def _dropped_groups(a, emit):
    """A name bound to a param-group dict, then only filled before it is bound again or its function
    ends: whatever it collected is thrown away."""
    for scope in a.index.scopes():
        statements = own_statements(scope)
        if not any(a.kind_of(c) == "optimizer" for s in statements for c in a.index.calls_in(s)
                   if isinstance(s, (ast.Assign, ast.Expr, ast.Return))):
            continue
        parents, loads, binds = {}, {}, {}
        for statement in statements:
            for node in ast.walk(statement):
                for child in ast.iter_child_nodes(node):
                    parents[id(child)] = node
                if isinstance(node, ast.Name):
                    (loads if isinstance(node.ctx, ast.Load) else binds).setdefault(node.id, []).append(node)
        for name, targets in binds.items():
            starts = sorted((t.lineno, t.col_offset, t) for t in targets)
            for i, (line, col, target) in enumerate(starts):
                assign = parents.get(id(target))
                if not (isinstance(assign, ast.Assign) and _group_dict(assign.value)):
                    continue
                end = starts[i + 1][:2] if i + 1 < len(starts) else (float("inf"), 0)
                reads = [n for n in loads.get(name, []) if (line, col) < (n.lineno, n.col_offset) < end]
                if reads and all(_fill(n, parents) for n in reads):
                    emit(assign, CODE, what=DROPPED.format(name=name))


def _weight_bias_only(a, emit):
    """Optimizer groups gathered by walking `modules()`/`named_modules()` and taking `.weight`/`.bias`,
    with no `parameters()` given to any optimizer, in a file whose module class owns another
    nn.Parameter."""
    walks = [loop for loop in a.index.of(ast.For) if isinstance(loop.iter, ast.Call)
             and isinstance(loop.iter.func, ast.Attribute) and loop.iter.func.attr in ("modules", "named_modules")]
    taken = set()
    for loop in walks:
        for call in a.index.calls_in(loop):
            if isinstance(call.func, ast.Attribute) and call.func.attr == "append" and call.args \
                    and isinstance(call.args[0], ast.Attribute) and call.args[0].attr in ("weight", "bias"):
                taken.add(dotted(call.func.value))
    taken.discard(None)
    if not taken:
        return
    optimizers = [c for c in a.index.calls if a.kind_of(c) == "optimizer"]
    groups = [c for c in a.index.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "add_param_group"]
    given = {dotted(n) for c in optimizers + groups for n in ast.walk(c) if isinstance(n, ast.Name)}
    if not optimizers or not taken & given or any(a.parameter_owners(c) for c in optimizers):
        return
    for cls in a.index.of(ast.ClassDef):
        if not any((a.imp.canon(b) or dotted(b) or "").endswith("Module") for b in cls.bases):
            continue
        for node in ast.walk(cls):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                    and a.imp.canon(node.value.func) == "torch.nn.Parameter":
                for target in node.targets:
                    name = dotted(target) or ""
                    if name.startswith("self.") and name[5:] not in ("weight", "bias"):
                        emit(node, CODE, what=WEIGHT_BIAS.format(cls=cls.name, attr=name[5:]))
                        return


PART_LEFT_OUT = ("the optimizers are given {given} but not {part}, which {cls}.__init__ builds from fresh layers "
                 "and {cls} uses: its weights get gradients and never change")
WEIGHTED = ("Linear", "Conv", "Embedding", "LSTM", "GRU", "RNN", "BatchNorm", "LayerNorm", "GroupNorm", "Bilinear",
            "MultiheadAttention", "Transformer", "Parameter", "PReLU")
KEPT_APART = ("target", "ema", "teacher", "frozen", "momentum", "old", "avg", "shadow", "prior", "ref", "pretrained")
LOADS = ("load_state_dict", "from_pretrained", "torch.load", "load_checkpoint", "hub.load", "pretrained=True")


def _family(a, cls, with_subclasses: bool) -> list:
    """`cls`, the classes of the file it is built on, and (when asked) those built on it."""
    classes = {c.name: c for c in a.index.of(ast.ClassDef)}
    out, pending = [], [cls]
    while pending:
        c = pending.pop()
        if c in out:
            continue
        out.append(c)
        pending += [classes[b.id] for b in c.bases if isinstance(b, ast.Name) and b.id in classes]
        if with_subclasses and c is cls:
            pending += [k for k in classes.values() if any(isinstance(b, ast.Name) and b.id == cls.name for b in k.bases)]
    return out


def _fresh_weights(a, value, depth: int = 0) -> bool:
    """Whether an expression builds torch layers with weights here: `nn.Linear(...)`, a Sequential or
    ModuleList of them, a class of the file whose __init__ builds some, or a function of the file
    returning some. A model loaded or handed in is not fresh."""
    if depth > 3 or value is None:
        return False
    for node in ast.walk(value):
        if not isinstance(node, ast.Call):
            continue
        name = a.imp.canon(node.func) or ""
        if name.startswith("torch.nn.") and any(w in name.rsplit(".", 1)[-1] for w in WEIGHTED) and not torch_loss(name):
            return True
        if isinstance(node.func, ast.Name):
            cls = next((c for c in a.index.of(ast.ClassDef) if c.name == node.func.id), None)
            init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None) \
                if cls is not None else None
            fn = next((f for f in a.index.of(ast.FunctionDef) if f.name == node.func.id), None) if cls is None else None
            body = init or fn
            if body is not None and any(_fresh_weights(a, n.value, depth + 1) for n in ast.walk(body)
                                        if isinstance(n, (ast.Assign, ast.Return)) and n.value is not None):
                return True
    return False


def _parts_left_out(a, emit):
    """Optimizers over `P.x.parameters()` for some parts x of a model P whose class is in the file;
    a part `P.y` the class builds from fresh layers and uses, given to no optimizer, never trains."""
    text = a.text
    optimizers = [c for c in a.index.calls if a.kind_of(c) == "optimizer"]
    groups = [c for c in a.index.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "add_param_group"]
    owners = [a.parameter_owners(c) for c in optimizers]
    if not optimizers or groups or not all(owners) or any(word in text for word in LOADS):
        return
    given = {o for found in owners for o in found}
    parents = {o.rsplit(".", 1)[0] for o in given if "." in o}
    for parent in sorted(parents):
        if any(parent == g or parent.startswith(g + ".") for g in given):
            continue   # the whole model is given somewhere
        covered = {o.rsplit(".", 1)[1] for o in given if o.rsplit(".", 1)[0] == parent}
        if parent == "self":
            call = next(c for c, found in zip(optimizers, owners) if any(o.startswith("self.") for o in found))
            method = a.enclosing(call)
            cls = next((c for c in a.index.of(ast.ClassDef) if method is not None and method in c.body), None)
            if cls is None:
                continue
            family = [k for k in _family(a, cls, True) if k is cls or not any(
                isinstance(f, ast.FunctionDef) and f.name == method.name for f in k.body)]
        else:
            built = unchain(a.values.get(parent))
            cls = next((c for c in a.index.of(ast.ClassDef) if isinstance(built, ast.Call)
                        and isinstance(built.func, ast.Name) and c.name == built.func.id), None)
            if cls is None:
                continue
            family = _family(a, cls, False)
        builders = {id(fn): fn for c in optimizers for fn in [a.enclosing(c)] if fn is not None}
        named = {ast.unparse(n) for fn in builders.values() for n in ast.walk(fn) if isinstance(n, ast.Attribute)}
        mentioned = {d[len(parent) + 1:].split(".")[0] for d in named if d.startswith(parent + ".")}
        _report_parts(a, emit, family, covered, covered | mentioned, parent, text)


def _report_parts(a, emit, family, given, covered, parent, text):
    """Emit the first fresh, used, unfrozen part of `family`'s instances outside `covered` (the parts
    the optimizers are given, and every attribute the functions building them mention)."""
    methods = [f for k in family for f in k.body if isinstance(f, ast.FunctionDef)]
    used = {n.attr for f in methods if f.name != "__init__" for n in ast.walk(f)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"}
    for f in methods:
        if f.name != "__init__":
            continue
        for node in ast.walk(f):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            bound = node.targets[0].elts if isinstance(node.targets[0], ast.Tuple) else node.targets   # self.f, n = make()
            parts = [t[5:] for t in (dotted(b) or "" for b in bound) if t.startswith("self.")]
            part = next((p for p in parts if "." not in p and p not in covered and p in used
                         and not any(word in p.lower() for word in KEPT_APART)), "")
            if not part:
                continue
            mentions = [line for line in text.splitlines() if f".{part}" in line]
            if any("requires_grad" in line or "freeze" in line.lower() or ".eval()" in line or "no_grad" in line
                   for line in mentions):
                continue
            if _fresh_weights(a, node.value):
                cls = next(k for k in family if f in k.body)
                emit(node, CODE, what=PART_LEFT_OUT.format(
                    given=", ".join(sorted(f"{parent}.{c}" for c in given)), part=f"{parent}.{part}", cls=cls.name))
                return


def check(a, emit):
    _dropped_groups(a, emit)
    _weight_bias_only(a, emit)
    _parts_left_out(a, emit)
