"""What it finds: a training DataLoader (bound to a name with "train" in it, returned by a function
so named, such as Lightning's `train_dataloader()`, or iterated by a loop that trains) without a
sampler, that has `shuffle=False`, or no `shuffle` at all (the default is False) over a map-style
dataset; a dataset that is visibly iterable (an IterableDataset, a stream) is left alone.

Why it hurts training: every epoch sees the samples in the same order; sorted by class, each
batch holds one class, the model chases the latest class and BatchNorm statistics swing, so
the loss oscillates and accuracy stays near chance.

Example:
    train_loader = DataLoader(ImageFolder("train/"), batch_size=64)

Use instead:
    train_loader = DataLoader(ImageFolder("train/"), batch_size=64, shuffle=True)
"""
import ast

from kb_tools.lint.analysis import dotted, is_false, keyword

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
    out = []
    returned_as = _returned_names(a)
    for call in a.index.calls:
        if (a.imp.canon(call.func) or "") not in LOADERS:
            continue   # a DataLoader built here (a factory of the file is judged where it builds one)
        name = a.assigned.get(id(call)) or ""
        fn = a.enclosing(call)
        returned = fn is not None and "train" in fn.name.lower() and any(
            r.value is call or dotted(r.value) == name for r in a.returns(fn))
        names = {name} | returned_as.get((id(fn), name), set())
        if any("train" in n.lower() for n in names) or names & trained_over or returned:
            out.append(call)
    return out


def check(a, emit):
    for call in training_loaders(a):
        if keyword(call, "sampler") is not None or keyword(call, "batch_sampler") is not None:
            continue
        shuffle = keyword(call, "shuffle")
        if is_false(shuffle):
            emit(call, CODE, how="has shuffle=False")
        elif shuffle is None and len(call.args) < 3 and not any(k.arg is None for k in call.keywords) \
                and call.args and not iterable(a, call.args[0]):
            how = ("over a class-folder dataset has no shuffle=True" if class_folder(a, call.args[0])
                   else "has no shuffle=True")
            emit(call, CODE, how=how + " (the default is False)")
