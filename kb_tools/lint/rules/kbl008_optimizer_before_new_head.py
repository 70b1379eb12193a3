"""What it finds: after an optimizer was built over a model's `parameters()`, and with no optimizer
built again after it: a module (an `nn.` layer) assigned as an attribute of the model, a new model
assigned to the same name, or `resize_token_embeddings()` called on it.

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
MESSAGE = ("{how} {model} after its optimizer was built: the new parameters are not in the "
           "optimizer and never train")


REPLACERS = {"resize_token_embeddings"}   # methods that swap a model's parameters for new tensors


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


def check(a, emit):
    optimizers = []
    for node in sorted(a.index.of(ast.Assign), key=lambda n: n.lineno):
        value = node.value
        if isinstance(value, ast.Call) and a.kind_of(value) == "optimizer" and value.args:
            owner = method_call(value.args[0], "parameters")
            if owner:
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
                    emit(node, CODE, model=owner, how="a new module is attached to")
            elif name and _new_model(a, value, name) and _built_before(a, optimizers, name, node):
                emit(node, CODE, model=name, how="a new model is assigned to")   # the optimizer keeps the old one's
    built = [n for n in a.index.of(ast.Assign) if isinstance(n.value, ast.Call) and a.kind_of(n.value) == "optimizer"]
    for call in a.index.calls:
        owner = method_call(call, *REPLACERS)
        if not owner:
            continue
        here = a.enclosing(call)   # any optimizer built before it in the same function, none after
        before = [n for n in built if a.enclosing(n.value) is here and n.lineno < call.lineno]
        after = [n for n in built if a.enclosing(n.value) is here and n.lineno > call.lineno]
        if before and not after:
            emit(call, CODE, model=owner, how=f"{call.func.attr}() replaces parameters of")
