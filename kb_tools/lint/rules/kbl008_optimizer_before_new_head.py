"""What it finds: after an optimizer was built over a model's `parameters()`, and with no optimizer
built again after it: a module (an `nn.` layer) assigned as an attribute of the model, a new model
assigned to the same name, or `resize_token_embeddings()` or `add_adapter()` called on it. The
optimizer's parameters are followed through `filter()`, `list()`, comprehensions and param-group
dicts (`AdamW(groups)` over `model.named_parameters()`). Also a loss class of the file (named ...Loss
or ...Criterion) that owns weights (an `nn.Parameter`, a classifier layer) in a file whose every
optimizer is visibly built on other models' parameters and where nothing asks for the loss's own. And,
in such a file, a freshly built module with weights (a linear, convolution, embedding or recurrent
layer, or a class of the file that gives itself weights: an ArcFace margin head, a projection) that
the training step calls on what a trained model returned, where backward() runs, outside no_grad, and
that is never used any other way:
not handed to a function or a container, not attached to a model, not loaded, frozen or put in eval mode.

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

from kb_tools.lint.analysis import dotted, method_call, torch_loss, unchain, within

CODE, NAME, ENTRY = "KBL008", "optimizer-before-new-head", "params-not-in-optimizer"
MESSAGE = "{what}"
AFTER = "{how} {model} after its optimizer was built: the new parameters are not in the optimizer and never train"
UNUSED_WEIGHTS = ("{holder} ({cls}) has weights of its own and is called in the training step, but no optimizer "
                  "is given its parameters(): they get gradients and never change, so it stays as initialised")
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


WEIGHTED_LAYERS = ("Linear", "Bilinear", "LazyLinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
                   "ConvTranspose2d", "ConvTranspose3d", "Embedding", "EmbeddingBag", "LSTM", "GRU", "RNN",
                   "LSTMCell", "GRUCell", "RNNCell", "MultiheadAttention", "Transformer", "TransformerEncoder",
                   "TransformerDecoder", "TransformerEncoderLayer", "TransformerDecoderLayer", "PReLU")
HARMLESS_USES = {"to", "cuda", "cpu", "train", "float", "double", "half", "bfloat16", "forward"}


def _weighted_module(a, call, classes: dict) -> str | None:
    """The class name when `call` builds a fresh module with learnable weights: a torch.nn layer of
    WEIGHTED_LAYERS, an nn.Sequential holding one, or a class of this file whose __init__ gives itself
    weights; None for anything else (a pretrained constructor is not a call of these)."""
    name = a.imp.canon(call.func) or ""
    last = name.rsplit(".", 1)[-1]
    if name.startswith("torch.nn.") and last in WEIGHTED_LAYERS:
        return last
    if name == "torch.nn.Sequential" and any(isinstance(x, ast.Call) and _weighted_module(a, x, classes)
                                            for x in call.args):
        return last
    cls = classes.get(call.func.id) if isinstance(call.func, ast.Name) else None
    if cls is not None and any((a.imp.canon(b) or dotted(b) or "").endswith("Module") for b in cls.bases) \
            and _own_weights(a, cls):
        return cls.name
    return None


def _mentions(a, holders: set) -> dict:
    """{holder: [(node, parent)]}: every Name or Attribute of the file that spells one of `holders`."""
    out = {h: [] for h in holders}
    for parent in ast.walk(a.tree):
        for node in ast.iter_child_nodes(parent):
            if isinstance(node, (ast.Name, ast.Attribute)):
                name = dotted(node)
                if name in out:
                    out[name].append((node, parent))
    return out


def _only_called(mentions: list, assign, parents: dict) -> list:
    """The calls of a module (`head(x)`, `head.forward(x)`) when every other mention of its name is the
    assignment that built it or a harmless method call (`.to()`, `.train()`); [] when it is used any other
    way: passed on, stored, attached to a model, loaded, frozen, put in eval mode, its weights read."""
    calls = []
    for node, up in mentions:
        if up is assign and node in assign.targets:
            continue
        if isinstance(up, ast.Call) and up.func is node:
            calls.append(up)
        elif isinstance(up, ast.Attribute) and up.attr in HARMLESS_USES and isinstance(parents.get(id(up)), ast.Call) \
                and parents[id(up)].func is up:
            if up.attr == "forward":
                calls.append(parents[id(up)])
        else:
            return []
    return calls


def _fed_by_trained(a, call, owners: set) -> bool:
    """Whether the module call takes what a trained model returned: `head(model(x))`, or a name assigned
    from it (`feature = model(x); metric_fc(feature, y)`). A fixed random layer in front of the trained
    model (a random projection of the input) is a choice, not this mistake."""
    for arg in list(call.args) + [k.value for k in call.keywords]:
        value = a.value_at(arg.id, call) if isinstance(arg, ast.Name) else arg
        value = unchain(value) if isinstance(value, ast.Call) else value
        while isinstance(value, ast.Subscript):   # `model(x)[0]`
            value = value.value
        if isinstance(value, ast.Call) and (dotted(value.func) in owners or
                                            method_call(value, "forward") in owners):
            return True
    return False


def _under_no_grad(a, node) -> bool:
    return any(within(w, node) for w in a.no_grad_blocks)


def _used_weights_never_given(a, emit):
    """A fresh module with weights, only ever called, called where backward() runs and outside no_grad,
    in a file whose every optimizer is visibly given other models' parameters and where nothing asks for
    its parameters(): a head, margin layer or projection that trains nothing."""
    optimizers = [c for c in a.index.calls if a.kind_of(c) == "optimizer"]
    owners = [a.parameter_owners(c) for c in optimizers]
    if not optimizers or not all(owners) or any(o == "self" for group in owners for o in group):
        return
    if any(method_call(c, "add_param_group") for c in a.index.calls):
        return
    asked = {method_call(c, "parameters", "named_parameters") for c in a.index.calls} - {None, ""}
    asked_last = {x.rsplit(".", 1)[-1] for x in asked}
    trained_models = {o for group in owners for o in group}
    classes = {c.name: c for c in a.index.of(ast.ClassDef)}
    backward = [c for c in a.index.calls if method_call(c, "backward") is not None]
    built = []
    for assign in a.index.of(ast.Assign):
        value = unchain(assign.value)   # `nn.Linear(d, k).to(device)`
        if len(assign.targets) != 1 or not isinstance(value, ast.Call):
            continue
        holder = dotted(assign.targets[0])
        cls = _weighted_module(a, value, classes) if holder else None
        if cls is not None and holder not in asked and holder.rsplit(".", 1)[-1] not in asked_last:
            built.append((assign, holder, cls))
    if not built:
        return
    mentions = _mentions(a, {holder for _, holder, _ in built})
    wanted = {id(up) for found in mentions.values() for _, up in found if isinstance(up, ast.Attribute)}
    parents = {id(child): up for up in ast.walk(a.tree) for child in ast.iter_child_nodes(up) if id(child) in wanted}
    for assign, holder, cls in built:
        trained = [c for c in _only_called(mentions[holder], assign, parents) if not _under_no_grad(a, c)
                   and any(a.enclosing(b) is a.enclosing(c) for b in backward) and _fed_by_trained(a, c, trained_models)]
        if trained:
            emit(assign, CODE, what=UNUSED_WEIGHTS.format(holder=holder, cls=cls))


def check(a, emit):
    _loss_weights_never_given(a, emit)
    _used_weights_never_given(a, emit)
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
