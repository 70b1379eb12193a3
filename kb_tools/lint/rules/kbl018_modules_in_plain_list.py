"""What it finds: in a module's `__init__`, layers kept in a plain Python list or dict
(`self.layers = [nn.Linear(...) for _ in range(n)]`, `self.heads = {"a": nn.Linear(...)}`,
`nn.Module` objects appended to a list attribute, or stored under a key of a dict attribute); or
layers the module is given (`MergeLayer(layers)`) and keeps in a plain list attribute (`self._layers
= []` then `for layer in layers: self._layers.append(layer)`, `self._layers = list(layers)`, or
the argument itself), when a call of the file passes it a list of layers built there
(`MergeLayer([Conv(k) for k in sizes])`); a caller passing an `nn.ModuleList` is left alone.

Why it hurts training: `nn.Module` registers only submodules assigned as attributes or held in
`nn.ModuleList` / `nn.ModuleDict`, so these layers are missing from `model.parameters()` (the
optimizer never updates them), from `state_dict()` (they are not saved), and from `.to()` and
`.eval()`; the model still runs, with layers that keep their initial weights.

Example:
    self.blocks = [nn.Linear(64, 64) for _ in range(4)]

Use instead:
    self.blocks = nn.ModuleList([nn.Linear(64, 64) for _ in range(4)])
"""
import ast

from kb_tools.lint.analysis import dotted

CODE, NAME, ENTRY = "KBL018", "modules-in-plain-list", "modules-in-python-list"
MESSAGE = ("layers held in a plain list or dict are not registered: they are missing from parameters(), "
           "state_dict(), .to() and .eval(); use nn.ModuleList / nn.ModuleDict")

CONTAINERS = {"torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.Sequential", "torch.nn.ParameterList",
              "torch.nn.ParameterDict"}


def _module_classes(a) -> set:
    """Classes defined in the file that derive from nn.Module (directly, or from one of these)."""
    found: set = set()
    classes = a.index.of(ast.ClassDef)
    for _ in range(3):
        for cls in classes:
            if any(a.imp.canon(b) == "torch.nn.Module" or dotted(b) in found for b in cls.bases):
                found.add(cls.name)
    return found


def _builds_module(a, expr, local: set, depth: int = 0) -> bool:
    """Whether `expr` builds a layer: torch.nn.<Capitalised>(...) (an nn.Sequential too: inside a
    plain list it is as unregistered as any layer), a module class defined in this file, a function
    of the file whose every return builds one (`def branch(c): return nn.Sequential(...)`), or a
    local name assigned one of these just before (`conv = nn.Conv1d(...); self.convs.append(conv)`)."""
    if depth > 3:
        return False
    if isinstance(expr, ast.Name):
        value = a.value_at(expr.id, expr)
        return value is not None and value is not expr and _builds_module(a, value, local, depth + 1)
    if not isinstance(expr, ast.Call):
        return False
    name = a.imp.canon(expr.func)
    if name and name.startswith("torch.nn.") and name.count(".") == 2 and name.rsplit(".", 1)[1][:1].isupper():
        return name == "torch.nn.Sequential" or name not in CONTAINERS
    if dotted(expr.func) in local:
        return True
    found = a._definitions.functions.get(expr.func.id, []) if isinstance(expr.func, ast.Name) else []
    returns = a.returns(found[0]) if len(found) == 1 else []
    return bool(returns) and all(r.value is not None and _builds_module(a, r.value, local, depth + 1) for r in returns)


def _elements(value) -> list:
    if isinstance(value, (ast.List, ast.Tuple)):
        return list(value.elts)
    if isinstance(value, ast.Dict):
        return list(value.values)
    if isinstance(value, (ast.ListComp, ast.GeneratorExp)):
        return [value.elt]
    if isinstance(value, ast.DictComp):
        return [value.value]
    return []


def _stores_parameter(fn, plain: set) -> dict:
    """Parameter of `__init__` -> the statement that keeps its items in a plain list attribute:
    `self.X = P`, `self.X = list(P)`, `self.X = [v for v in P]`, `self.X.extend(P)`, or
    `for v in P: self.X.append(v)` with self.X a plain list."""
    params = {arg.arg for arg in fn.args.args[1:] + fn.args.kwonlyargs}
    stored = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and (dotted(node.targets[0]) or "").startswith("self."):
            value = node.value
            if isinstance(value, ast.Call) and dotted(value.func) in ("list", "tuple") and len(value.args) == 1:
                value = value.args[0]
            elif isinstance(value, ast.ListComp) and len(value.generators) == 1 \
                    and dotted(value.elt) == dotted(value.generators[0].target):
                value = value.generators[0].iter
            if isinstance(value, ast.Name) and value.id in params:
                stored.setdefault(value.id, node)
        elif isinstance(node, ast.For) and isinstance(node.iter, ast.Name) and node.iter.id in params:
            loop_var = dotted(node.target)
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "append" \
                        and dotted(call.func.value) in plain and len(call.args) == 1 and dotted(call.args[0]) == loop_var:
                    stored.setdefault(node.iter.id, call)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "extend" \
                and dotted(node.func.value) in plain and len(node.args) == 1 \
                and isinstance(node.args[0], ast.Name) and node.args[0].id in params:
            stored.setdefault(node.args[0].id, node)
    return stored


def _passed_layers(a, cls, fn, stored: dict, local: set) -> list:
    """The statements of `stored` whose parameter some call of the class in this file is given a
    plain list (or tuple, or comprehension) of layers built there."""
    out = []
    for call in a.index.calls:
        if dotted(call.func) != cls.name:
            continue
        for name, arg in a.bound_arguments(call, fn).items():
            if name in stored and any(_builds_module(a, e, local) for e in _elements(arg)):
                out.append(stored[name])
    return out


def _registers_by_hand(a, fn) -> bool:
    """`__init__` registers submodules itself: `self.add_module(...)`, `self.register_module(...)` or
    `setattr(self, name, layer)`."""
    for call in a.index.calls_in(fn):
        if isinstance(call.func, ast.Attribute) and call.func.attr in ("add_module", "register_module") \
                and dotted(call.func.value) == "self":
            return True
        if isinstance(call.func, ast.Name) and call.func.id == "setattr" and call.args and dotted(call.args[0]) == "self":
            return True
    return False


def _wrapped(a, fn) -> set:
    """The self.X attributes `__init__` hands to a torch container (`self.X = nn.Sequential(*self.X)`,
    `nn.ModuleList(self.X)`): their layers end up registered."""
    out = set()
    for call in a.index.calls_in(fn):
        if (a.imp.canon(call.func) or "") in CONTAINERS:
            for arg in call.args:
                name = dotted(arg.value if isinstance(arg, ast.Starred) else arg)
                if name and name.startswith("self."):
                    out.add(name)
    return out


def check(a, emit):
    local = _module_classes(a)
    for cls in a.index.of(ast.ClassDef):
        if cls.name not in local:
            continue
        for fn in cls.body:
            if not isinstance(fn, ast.FunctionDef) or fn.name != "__init__":
                continue
            if _registers_by_hand(a, fn):
                continue   # self.add_module(name, layer) / setattr(self, name, layer): registered all the same
            plain = set()  # self.X assigned a plain list or dict here (and not wrapped in a container later)
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target = dotted(node.targets[0])
                    if target and target.startswith("self.") and isinstance(
                            node.value, (ast.List, ast.Tuple, ast.Dict, ast.ListComp, ast.DictComp)) \
                            and target not in _wrapped(a, fn):
                        plain.add(target)
                        if any(_builds_module(a, e, local) for e in _elements(node.value)):
                            emit(node, CODE)
            for node in ast.walk(fn):   # self.weights["w%d" % i] = nn.Linear(...): a module stored in a plain dict
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript) \
                        and dotted(node.targets[0].value) in plain and _builds_module(a, node.value, local):
                    emit(node, CODE)
            for call in a.index.calls_in(fn):
                if isinstance(call.func, ast.Attribute) and call.func.attr in ("append", "extend", "insert") \
                        and dotted(call.func.value) in plain and call.args \
                        and any(_builds_module(a, e, local) for e in [call.args[-1], *_elements(call.args[-1])]):
                    emit(call, CODE)
            stored = _stores_parameter(fn, plain)
            for node in _passed_layers(a, cls, fn, stored, local) if stored else ():
                emit(node, CODE)
