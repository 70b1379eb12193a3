"""What it finds: after an optimizer was built over a model's `parameters()`, and with no optimizer
built again after it: a module (an `nn.` layer) assigned as an attribute of the model, a new model
assigned to the same name, or `resize_token_embeddings()` or `add_adapter()` called on it. The
optimizer's parameters are followed through `filter()`, `list()`, comprehensions and param-group
dicts (`AdamW(groups)` over `model.named_parameters()`). Also a loss class of the file (named ...Loss
or ...Criterion) that owns weights (an `nn.Parameter`, a classifier layer) in a file whose every
optimizer is visibly built on other models' parameters and where nothing asks for the loss's own.

Why it hurts training: the optimizer holds the parameter list it was given; the new head's
parameters are not in it, so they get gradients but never change, and the model learns nothing
through them (a frozen random classifier).

Example:
    opt = torch.optim.Adam(model.parameters())
    model.fc = nn.Linear(512, 10)

Use instead:
    model.fc = nn.Linear(512, 10)
    opt = torch.optim.Adam(model.parameters())
"""
import ast

from kb_tools.lint.analysis import dotted, method_call, torch_loss

CODE, NAME, ENTRY = "KBL008", "optimizer-before-new-head", "params-not-in-optimizer"
MESSAGE = "{what}"
AFTER = "{how} {model} after its optimizer was built: the new parameters are not in the optimizer and never train"
LOSS_WEIGHTS = ("the loss module {model} has its own weights ({weights}) but no optimizer is given its parameters: "
                "they get gradients and never change")


REPLACERS = {"resize_token_embeddings", "add_adapter"}   # methods that add to or swap a model's parameters


def _built_before(a, optimizers, owner: str, node) -> bool:
    """An optimizer over `owner`'s parameters built earlier in the same function (file order is run
    order only within one function), and none built over them after `node` there."""
    here = a.enclosing(node)
    mine = [line for o, line, fn in optimizers if o == owner and fn is here]
    return any(line < node.lineno for line in mine) and not any(line > node.lineno for line in mine)


def _new_model(a, value, name: str) -> bool:
    """A constructor call that builds a new model: a class of this file or a torch.nn module, not a
    wrapper around the model itself (`model = DDP(model)` shares its parameters)."""
    if not isinstance(value, ast.Call) or any(dotted(n) == name for n in ast.walk(value)):
        return False
    name = a.imp.canon(value.func) or ""
    if name.startswith("torch.nn.") and name.split(".")[-1][:1].isupper() and not torch_loss(name):
        return True
    return isinstance(value.func, ast.Name) and value.func.id in a.class_output


WEIGHTLESS = ("ReLU", "LeakyReLU", "GELU", "SiLU", "ELU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Dropout",
              "Identity", "Flatten", "Unflatten", "MaxPool", "AvgPool", "AdaptiveAvgPool", "AdaptiveMaxPool",
              "Upsample", "PixelShuffle", "ModuleList", "ModuleDict", "Sequential", "Softplus", "Hardtanh")


def _own_weights(a, cls) -> list:
    """The attributes a loss class's __init__ gives learnable weights: `self.s = nn.Parameter(...)`,
    `self.fc = nn.Linear(...)` (not activations, pooling, containers or torch losses)."""
    init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    out = []
    for node in ast.walk(init) if init is not None else []:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        name = a.imp.canon(node.value.func) or ""
        last = name.rsplit(".", 1)[-1]
        if name == "torch.nn.Parameter" or (name.startswith("torch.nn.") and last[:1].isupper() and not torch_loss(name)
                                           and not any(last.startswith(w) for w in WEIGHTLESS)):
            out += [dotted(t) for t in node.targets if (dotted(t) or "").startswith("self.")]
    return out


def _loss_weights_never_given(a, emit):
    """A loss class of the file (named ...Loss or ...Criterion, an nn.Module) that owns weights, built
    in a file whose every optimizer is visibly given other models' parameters, while nothing asks for
    the loss's parameters(): its classifier or learnt loss weights get gradients and never change."""
    optimizers = [c for c in a.index.calls if a.kind_of(c) == "optimizer"]
    owners = [a.parameter_owners(c) for c in optimizers]
    if not optimizers or not all(owners) or any(o == "self" or o.startswith("self.") for group in owners for o in group):
        return
    asked = {method_call(c, "parameters", "named_parameters") for c in a.index.calls} - {None, ""}
    asked_last = {x.rsplit(".", 1)[-1] for x in asked}   # `self.crit.parameters()` asks for `crit`'s
    if any(method_call(c, "add_param_group") for c in a.index.calls):
        return
    for cls in a.index.of(ast.ClassDef):
        lowered = cls.name.lower()
        if not (lowered.endswith("loss") or "criterion" in lowered) or not any(
                (a.imp.canon(b) or dotted(b) or "").endswith("Module") for b in cls.bases):
            continue
        weights = _own_weights(a, cls)
        built = [c for c in a.index.calls if isinstance(c.func, ast.Name) and c.func.id == cls.name]
        holders = {a.assigned.get(id(c)) for c in built} - {None, ""}
        if weights and built and not any(h in asked or h.rsplit(".", 1)[-1] in asked_last for h in holders):
            emit(built[0], CODE, what=LOSS_WEIGHTS.format(model=cls.name, weights=", ".join(weights[:3])))


def check(a, emit):
    _loss_weights_never_given(a, emit)
    optimizers = []
    for node in sorted(a.index.of(ast.Assign), key=lambda n: n.lineno):
        value = node.value
        if isinstance(value, ast.Call) and a.kind_of(value) == "optimizer":
            for owner in a.parameter_owners(value):
                optimizers.append((owner, node.lineno, a.enclosing(value)))
    for node in sorted(a.index.of(ast.Assign), key=lambda n: n.lineno):
        value = node.value
        for target in node.targets:
            name = dotted(target)
            if isinstance(target, ast.Attribute) and isinstance(value, ast.Call):
                owner = dotted(target.value)
                vname = a.imp.canon(value.func) or ""
                if owner and vname.startswith("torch.nn.") and vname.split(".")[-1][:1].isupper() \
                        and _built_before(a, optimizers, owner, node):
                    emit(node, CODE, what=AFTER.format(model=owner, how="a new module is attached to"))
            elif name and _new_model(a, value, name) and _built_before(a, optimizers, name, node):
                # the optimizer keeps the old model's parameters
                emit(node, CODE, what=AFTER.format(model=name, how="a new model is assigned to"))
    built = [n for n in a.index.of(ast.Assign) if isinstance(n.value, ast.Call) and a.kind_of(n.value) == "optimizer"]
    for call in a.index.calls:
        owner = method_call(call, *REPLACERS)
        if not owner:
            continue
        here = a.enclosing(call)   # any optimizer built before it in the same function, none after
        before = [n for n in built if a.enclosing(n.value) is here and n.lineno < call.lineno]
        after = [n for n in built if a.enclosing(n.value) is here and n.lineno > call.lineno]
        if before and not after:
            emit(call, CODE, what=AFTER.format(model=owner, how=f"{call.func.attr}() adds or replaces parameters of"))
