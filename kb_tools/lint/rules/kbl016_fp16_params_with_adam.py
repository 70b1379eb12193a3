"""What it finds: a model whose parameters are cast to float16 (`.half()`, `.to(torch.float16)`,
`from_pretrained(..., torch_dtype=torch.float16)` on some path, or a module class of the file that
half-casts itself or a submodule in `__init__`) and trained with an Adam-family optimizer or handed
to a Hugging Face `Trainer` (whose default optimizer is AdamW; a model wrapped by peft, whose
adapters stay in float32, is left alone) (its parameters followed through `filter()`, lists and
param groups; the class also through a name it is bound to, `opt_cls = optim.Adam`), in a file
with no autocast; or, in such a file, any Adam-family optimizer when the file makes float16 the
default for new tensors
(`torch.set_default_dtype(torch.float16)`, `torch.set_default_tensor_type(torch.HalfTensor)`).

Why it hurts training: in fp16, Adam's eps (1e-8) underflows to zero and its second moment to
denormals, so updates become inf/NaN or vanish; small updates are also rounded away against
fp16 weights. Mixed precision keeps fp32 weights and casts only the computation.

Example:
    model = Net().cuda().half()
    opt = torch.optim.Adam(model.parameters())

Use instead:
    model = Net().cuda()
    opt = torch.optim.Adam(model.parameters())
    with torch.autocast("cuda", dtype=torch.float16): loss = ...
"""
import ast

from kb_tools.lint.analysis import ADAM, dotted, method_call, unchain, within

CODE, NAME, ENTRY = "KBL016", "fp16-params-with-adam", "adam-eps-low-precision"
MESSAGE = ("the model's parameters are {how} and trained with {opt}: its eps and second moment underflow "
           "in fp16; keep fp32 weights and use autocast")
DEFAULT_SETTERS = {"torch.set_default_dtype", "torch.set_default_tensor_type"}
HALF = {"torch.float16", "torch.half", "torch.HalfTensor", "torch.cuda.HalfTensor"}


def _half_by_default(a, call) -> bool:
    """torch.set_default_dtype(torch.float16) or set_default_tensor_type(torch.HalfTensor), or its string form."""
    if a.imp.canon(call.func) not in DEFAULT_SETTERS or not call.args:
        return False
    arg = call.args[0]
    return a.imp.canon(arg) in HALF or (isinstance(arg, ast.Constant) and arg.value in HALF)


def _fp16_dtype(a, expr, depth=0) -> bool:
    """`torch.float16`, "float16", or a conditional or name that holds it on some path."""
    if expr is None or depth > 3:
        return False
    if a.imp.canon(expr) in ("torch.float16", "torch.half") or (
            isinstance(expr, ast.Constant) and expr.value in ("float16", "fp16", "half")):
        return True
    if isinstance(expr, ast.IfExp):
        return _fp16_dtype(a, expr.body, depth + 1) or _fp16_dtype(a, expr.orelse, depth + 1)
    name = dotted(expr)
    return name is not None and any(_fp16_dtype(a, v, depth + 1) for _, v, _ in a.history.get(name, []))


def _self_halving_classes(a) -> set:
    """Module classes of the file whose __init__ casts the module or a submodule to float16
    (`self.model.half()`, under a precision option or not): every instance trains in fp16."""
    out = set()
    for cls in a.index.of(ast.ClassDef):
        init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        if init is not None and any(method_call(c, "half") is not None and not c.args
                                    and (dotted(c.func.value) or "").split(".")[0] == "self"
                                    for c in a.index.calls_in(init)):
            out.add(cls.name)
    return out


def _hf_trained(a) -> set:
    """Names handed as `model=` to a transformers Trainer (or to `super().__init__` in a Trainer subclass)."""
    out = set()
    trainers = {cls.name for cls in a.index.of(ast.ClassDef)
                if any((a.imp.canon(b) or "").startswith("transformers.") and (dotted(b) or "").endswith("Trainer")
                       for b in cls.bases)}
    for c in a.index.calls:
        canon = a.imp.canon(c.func) or ""
        own = isinstance(c.func, ast.Name) and c.func.id in trainers
        inside = isinstance(c.func, ast.Attribute) and c.func.attr == "__init__" and isinstance(c.func.value, ast.Call) \
            and dotted(c.func.value.func) == "super" and a.enclosing(c) is not None and any(
                within(cls, c) for cls in a.index.of(ast.ClassDef) if cls.name in trainers)
        if (canon.startswith("transformers.") and canon.endswith("Trainer")) or own or inside:
            model = next((k.value for k in c.keywords if k.arg == "model"), c.args[0] if c.args and not inside else None)
            if dotted(model):
                out.add(dotted(model))
    return out


def check(a, emit):
    def to_fp16(c):
        return (method_call(c, "half") is not None and not c.args) or (method_call(c, "to") is not None and any(
            a.imp.canon(arg) in ("torch.float16", "torch.half") for arg in list(c.args) + [k.value for k in c.keywords]))

    def adam_family(c) -> str | None:
        """The Adam-family class a call builds: `torch.optim.Adam(...)`, or `opt_cls(...)` after
        `opt_cls = optim.Adam` (any assignment of the name in the file)."""
        name = a.imp.canon(c.func)
        if name in ADAM:
            return name
        held = [a.imp.canon(v) for _, v, _ in a.history.get(dotted(c.func) or "", [])]
        return next((h for h in held if h in ADAM), None)
    def loaded_fp16(c):
        return isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "from_pretrained" and any(
            k.arg in ("torch_dtype", "dtype") and _fp16_dtype(a, k.value) for k in c.keywords)

    calls = a.index.calls
    cast_in = {}   # name -> the functions (None: module level) where it is cast or bound to a cast
    for c in calls:
        if to_fp16(c) and method_call(c, "half", "to"):
            cast_in.setdefault(method_call(c, "half", "to"), set()).add(a.enclosing(c))
    halving = _self_halving_classes(a)
    for node in a.index.of(ast.Assign):   # model = Net().cuda().half(): the name bound to the cast result
        value = unchain(node.value)
        if isinstance(node.value, ast.Call) and (to_fp16(node.value) or loaded_fp16(value) or (
                isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in halving)):
            for t in node.targets:
                if dotted(t):
                    cast_in.setdefault(dotted(t), set()).add(a.enclosing(node))
    casted = set(cast_in)

    def cast_for(opt) -> set:
        """The optimizer's owners cast to fp16 where it sees them: a name its own function binds
        counts only when cast there (a validation helper's fp16 copy of the same name is another model)."""
        fn = a.enclosing(opt)
        return {n for n in a.parameter_owners(opt) if n in casted and (
            fn in cast_in[n] or not any(holder is fn for _, _, holder in a.history.get(n, [])))}
    if any((a.imp.canon(c.func) or "").startswith("peft.") for c in calls):
        casted -= {dotted(c.args[0]) for c in calls if (a.imp.canon(c.func) or "").startswith("peft.") and c.args}
    half_default = any(_half_by_default(a, c) for c in calls)
    if not (casted or half_default) or any((a.imp.canon(c.func) or "").endswith("autocast") for c in calls):
        return
    for c in calls:
        name = adam_family(c)
        if name and cast_for(c):
            emit(c, CODE, opt=name.rsplit(".", 1)[-1], how="cast to float16")
        elif name and c.args and half_default:
            emit(c, CODE, opt=name.rsplit(".", 1)[-1], how="float16 by default (the file sets the default dtype)")
        elif name and halving and _through_class(a, c, halving):
            emit(c, CODE, opt=name.rsplit(".", 1)[-1], how="cast to float16 by their own class")
    for model in sorted(_hf_trained(a) & casted):
        emit(next(c for c in calls if any(dotted(k.value) == model for k in c.keywords) or (
            c.args and dotted(c.args[0]) == model and (a.imp.canon(c.func) or dotted(c.func) or "").endswith(
                ("Trainer", "__init__")))), CODE, opt="the Trainer's default AdamW", how="loaded in float16")


def _through_class(a, call, halving) -> bool:
    """The optimizer's parameters belong to an instance of a self-halving class: the owner name, followed
    back through parameters and assignments, was built by one."""
    pending, seen = list(a.parameter_owners(call)), set()
    while pending and len(seen) < 12:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        values = [v for _, v, _ in a.history.get(name, [])] + [
            arg for c in a.index.calls if (fn := a.called_function(c)) is not None
            for param, arg in a.bound_arguments(c, fn).items() if param == name]   # what callers pass it
        for value in values:
            value = unchain(value)
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in halving:
                return True
            if dotted(value):
                pending.append(dotted(value))
    return False
