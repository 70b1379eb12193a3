"""What it finds: a training DataLoader (bound to a name with "train" in it, returned by a function
so named, such as Lightning's `train_dataloader()`, or iterated by a loop that trains) without a
sampler, that has `shuffle=False`, or no `shuffle` at all (the default is False) over a map-style
dataset; a dataset that is visibly iterable (an IterableDataset, a stream), built with its own
`shuffle=` option, or serving whole batches itself (`batch_size=None`) is left alone. Keyword
arguments spread from a dict (`DataLoader(ds, **params)`) are read when the dict is a literal of
the file, directly, through a name, or through the parameter of a function whose every caller in
the file passes one; a spread that cannot be read keeps the rule silent. A class-folder dataset
whose labels every loop over it discards (`for x, _ in loader`) is read for its images only and
is left alone.

The code is followed as written: `shuffle=args.shuffle` is False when the file's argparse option
defaults to False; a `sampler=` that is None on some path (a conditional with a None branch, a
name set to None before a branch that may replace it, a builder's parameter defaulting to None
that no caller sets) leaves that path with no sampler; the loader class may be held in a name or
be the file's own DataLoader subclass; a loader a builder returns takes the names its callers bind
it to; and a loader handed to a parameter named like `train_loader` (a trainer's `__init__`) trains.

Why it hurts training: every epoch sees the samples in the same order; sorted by class, each
batch holds one class, the model chases the latest class and BatchNorm statistics swing, so
the loss oscillates and accuracy stays near chance.

Example:
    train_loader = DataLoader(ImageFolder("train/"), batch_size=64)

Use instead:
    train_loader = DataLoader(ImageFolder("train/"), batch_size=64, shuffle=True)
"""
import ast

from kb_tools.lint.analysis import dotted, is_false, keyword, parameter_defaults

CODE, NAME, ENTRY = "KBL009", "train-loader-not-shuffled", "train-shuffle-off"
MESSAGE = "training DataLoader {how}: every epoch sees the samples in the same order (often sorted by class)"


def class_folder(a, expr) -> bool:
    """Whether a dataset is visibly an ImageFolder/DatasetFolder: its samples are sorted by class."""
    value = a.values.get(dotted(expr) or "", expr)
    return isinstance(value, ast.Call) and (
        (a.imp.canon(value.func) or dotted(value.func) or "").rsplit(".", 1)[-1] in ("ImageFolder", "DatasetFolder"))


LOADERS = {"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"}
ITERABLE_WORDS = ("iterable", "stream", "webdataset", "wds", "shard", "infinite", "pipe")


def iterable(a, expr) -> bool:
    """Whether a dataset is visibly iterable (shuffle is not allowed there): a class of this file
    built on IterableDataset, or a name or constructor that says stream, iterable or shards."""
    value = a.values.get(dotted(expr) or "", expr)
    text = ast.unparse(value).lower() if value is not None else ""
    if any(word in text for word in ITERABLE_WORDS) or any(word in (dotted(expr) or "").lower() for word in ITERABLE_WORDS):
        return True
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        cls = next((c for c in a.index.of(ast.ClassDef) if c.name == value.func.id), None)
        return cls is not None and any("Iterable" in (dotted(b) or "") for b in cls.bases)
    return not isinstance(value, ast.Call) and dotted(expr) is None   # a subscript, a comprehension: unknown


def _returned_names(a) -> dict:
    """(id(function), local name) -> the names its callers give it: `return tr, va` unpacked as
    `train_loader, val_loader = get_loaders()` names `tr` train_loader."""
    out = {}
    for name, seen in a.history.items():
        for _, value, _ in seen:
            if not (isinstance(value, ast.Subscript) and isinstance(value.value, ast.Call)
                    and isinstance(value.slice, ast.Constant) and isinstance(value.slice.value, int)):
                continue
            fn = a.callee(value.value)
            if fn is None:
                continue
            for ret in (r for r in a.returns(fn) if isinstance(r.value, ast.Tuple)):
                if value.slice.value < len(ret.value.elts) and dotted(ret.value.elts[value.slice.value]):
                    out.setdefault((id(fn), dotted(ret.value.elts[value.slice.value])), set()).add(name)
    return out


def training_loaders(a) -> list:
    """The DataLoader calls visibly used for training: bound to (or returned to callers as) a name
    with "train" in it, iterated by a loop that trains, passed as a `train...=` keyword, or
    returned by a function named for training (Lightning's train_dataloader())."""
    trained_over = set()
    for scope in a.loop_scopes:
        for loop in scope.loops:
            if isinstance(loop, ast.For) and a.trains(loop):
                it = loop.iter
                while isinstance(it, ast.Call) and it.args and (dotted(it.func) or "").rsplit(".", 1)[-1] in (
                        "enumerate", "tqdm", "iter", "zip"):
                    it = it.args[0]
                if dotted(it):
                    trained_over.add(dotted(it))
    for call in a.index.calls:   # fit(train_dataloaders=loader), train(train_loader=loader)
        trained_over.update(dotted(k.value) for k in call.keywords if k.arg and "train" in k.arg.lower() and dotted(k.value))
        fn = a.called_function(call)   # Trainer(cfg, loader) whose __init__ names that parameter train_loader
        if fn is not None:
            trained_over.update(dotted(arg) for param, arg in a.bound_arguments(call, fn).items()
                                if "train" in param.lower() and "load" in param.lower() and dotted(arg))
    out = []
    returned_as = _returned_names(a)
    for call in a.index.calls:
        if not _is_loader_class(a, call.func):
            continue   # a DataLoader built here (a factory of the file is judged where it builds one)
        name = a.assigned.get(id(call)) or ""
        fn = a.enclosing(call)
        returned = fn is not None and "train" in fn.name.lower() and any(
            r.value is call or dotted(r.value) == name for r in a.returns(fn))
        names = {name} | returned_as.get((id(fn), name), set())
        if fn is not None and any(r.value is call or (name and dotted(r.value) == name) for r in a.returns(fn)):
            names |= {a.assigned.get(id(c)) or "" for c in a.index.calls if a.called_function(c) is fn}   # loader = make(cfg)
        if any("train" in n.lower() for n in names) or names & trained_over or returned:
            out.append(call)
    return out


def _none_on_some_path(a, call, expr, depth: int = 0) -> bool:
    """Whether `expr` is None on some path to the loader: `sampler=None`, a conditional with a None
    branch, a local name assigned None before it (`inner = None; if rank != -1: inner = ...`), or an
    unset parameter (_unset_parameter)."""
    if isinstance(expr, ast.Constant) and expr.value is None:
        return True
    if isinstance(expr, ast.IfExp):
        return any(isinstance(b, ast.Constant) and b.value is None for b in (expr.body, expr.orelse))
    fn = a.enclosing(call)   # None at module level, where the names are the module's own
    if isinstance(expr, ast.Name) and depth < 4:
        seen = [v for end, v, holder in a.history.get(expr.id, []) if holder is fn and end <= (call.lineno, call.col_offset)]
        if any(_none_on_some_path(a, call, v, depth + 1) for v in seen if v is not expr):
            return True
    return _unset_parameter(a, call, expr)


def _is_loader_class(a, func, depth: int = 0) -> bool:
    """A DataLoader class: torch's, a class of the file built on it, or a name bound to either
    (`loader_cls = Persistent if workers else DataLoader`)."""
    if (a.imp.canon(func) or "") in LOADERS:
        return True
    cls = next((c for c in a.index.of(ast.ClassDef) if isinstance(func, ast.Name) and c.name == func.id), None)
    if cls is not None:
        return any((a.imp.canon(b) or dotted(b) or "").endswith("DataLoader") for b in cls.bases)
    held = [v for _, v, _ in a.history.get(dotted(func) or "", [])] if depth < 3 else []
    sides = [s for v in held for s in ((v.body, v.orelse) if isinstance(v, ast.IfExp) else (v,))]
    return bool(sides) and all(_is_loader_class(a, side, depth + 1) for side in sides)


def _unset_parameter(a, call, expr) -> bool:
    """Whether `expr` is a parameter of the function building the loader that defaults to None and that
    no caller in the file passes (`def make_loader(cfg, sampler=None): DataLoader(..., sampler=sampler)`)."""
    fn = a.enclosing(call)
    if fn is None or not isinstance(expr, ast.Name):
        return False
    default = parameter_defaults(fn).get(expr.id)
    if not (isinstance(default, ast.Constant) and default.value is None) or a.assigned_within(expr.id, fn):
        return False
    callers = [c for c in a.index.calls if a.called_function(c) is fn]
    return not any(expr.id in a.bound_arguments(c, fn) for c in callers)


def _mutated(a, name: str) -> bool:
    """Whether the file changes a dict named `name` after building it: `name.update(...)`,
    `name["k"] = ...`, `name |= ...`, `name.setdefault(...)`."""
    for call in a.index.calls:
        if isinstance(call.func, ast.Attribute) and call.func.attr in ("update", "setdefault") \
                and dotted(call.func.value) == name:
            return True
    for node in a.index.of(ast.Assign, ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any((isinstance(t, ast.Subscript) and dotted(t.value) == name)
               or (isinstance(node, ast.AugAssign) and dotted(t) == name) for t in targets):
            return True
    return False


def _literal_keys(a, expr, where) -> set | None:
    """The keys of a dict literal `expr` is, or names (at `where`, and never changed after), with
    constant string keys; else None."""
    if isinstance(expr, ast.Name):
        if _mutated(a, expr.id):
            return None
        expr = a.value_at(expr.id, where)
    if not isinstance(expr, ast.Dict) or not all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                                 for k in expr.keys):
        return None
    return {k.value for k in expr.keys if isinstance(k, ast.Constant)}


def _spread_keys(a, call, spread) -> set | None:
    """The keys a `**spread` of `call` hands over, when they can be read: a dict literal, a name bound
    to one, or a parameter of the enclosing function whose callers in the file all pass one."""
    fn = a.enclosing(call)
    if not isinstance(spread, ast.Name) or fn is None \
            or spread.id not in {arg.arg for arg in fn.args.args + fn.args.kwonlyargs}:
        return _literal_keys(a, spread, call)
    if a.assigned_within(spread.id, fn):
        return None
    callers = [c for c in a.index.calls if a.callee(c) is fn]
    keys: set = set()
    for caller in callers:
        passed = _literal_keys(a, a.bound_arguments(caller, fn).get(spread.id), caller)
        if passed is None:
            return None
        keys |= passed
    return keys if callers else None


def _spread_without_order(a, call) -> bool:
    """Whether the call spreads keyword dicts (`**params`) and none of them can set shuffle or a sampler."""
    spreads = [k.value for k in call.keywords if k.arg is None]
    if not spreads:
        return False
    keys = [_spread_keys(a, call, value) for value in spreads]
    return all(k is not None and not k & {"shuffle", "sampler", "batch_sampler"} for k in keys)


def _labels_discarded(a, call) -> bool:
    """Whether every loop over the loader throws its labels away (`for x, _ in loader`,
    `for i, (x, _) in enumerate(loader)`): a class folder read only for its images (one folder of
    content images, as style transfer uses) has no class order to harm."""
    name = a.assigned.get(id(call))
    loops = []
    for loop in a.index.of(ast.For):
        it, target = loop.iter, loop.target
        if isinstance(it, ast.Call) and it.args and (dotted(it.func) or "").rsplit(".", 1)[-1] == "enumerate":
            it = it.args[0]
            target = target.elts[1] if isinstance(target, ast.Tuple) and len(target.elts) == 2 else None
        if name and dotted(it) == name:
            loops.append(target)
    return bool(loops) and all(isinstance(t, ast.Tuple) and len(t.elts) >= 2 and all(
        isinstance(e, ast.Name) and e.id.startswith("_") for e in t.elts[1:]) for t in loops)


def _dataset_orders_itself(a, expr) -> bool:
    """Whether the dataset is built with an order option of its own (`MelDataset(..., shuffle=...)`):
    it decides its order, which the loader's flags do not show."""
    value = a.values.get(dotted(expr) or "", expr)
    return isinstance(value, ast.Call) and any(k.arg in ("shuffle", "shuffle_data") for k in value.keywords)


def check(a, emit):
    for call in training_loaders(a):
        if call.args and _dataset_orders_itself(a, call.args[0]):
            continue
        size = keyword(call, "batch_size")
        if isinstance(size, ast.Constant) and size.value is None:
            continue   # automatic batching off: the dataset serves whole batches in an order of its own
        if any(keyword(call, k) is not None and not _none_on_some_path(a, call, keyword(call, k))
               for k in ("sampler", "batch_sampler")):
            continue
        shuffle = keyword(call, "shuffle")
        if is_false(shuffle):
            emit(call, CODE, how="has shuffle=False")
        elif is_false(a.cli_default(shuffle)):
            emit(call, CODE, how=f"has shuffle={ast.unparse(shuffle)} (its command-line option defaults to False)")
        elif shuffle is None and len(call.args) < 3 and call.args and not iterable(a, call.args[0]) \
                and (not any(k.arg is None for k in call.keywords) or _spread_without_order(a, call)):
            folder = class_folder(a, call.args[0])
            if folder and _labels_discarded(a, call):
                continue
            how = "over a class-folder dataset has no shuffle=True" if folder else "has no shuffle=True"
            emit(call, CODE, how=how + " (the default is False)")
