"""What it finds: parameters an optimizer's hand-built groups leave out. A param-group dict
(`{"params": [], "lr": ...}`) that is filled (`group["params"].append(p)`) and then never read
again, so it never reaches the optimizer; and groups gathered from `named_modules()` by each
module's `.weight` and `.bias` only, in a file whose own module class keeps a learnable
`nn.Parameter` under another name (fusion weights, a temperature, a scale), which no group holds.

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

from kb_tools.lint.analysis import dotted, own_statements

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


def check(a, emit):
    _dropped_groups(a, emit)
    _weight_bias_only(a, emit)
