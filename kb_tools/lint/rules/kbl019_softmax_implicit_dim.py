"""What it finds: `F.softmax(x)` / `F.log_softmax(x)` called without `dim` in a model's `forward` or
in code that trains, or `nn.Softmax()` / `nn.LogSoftmax()` built without `dim`; and, in an
`nn.Sequential`, an `nn.Softmax(dim=0)` right after an `nn.Linear` (a Linear's classes are its last
axis; dim 0 is the batch). A softmax that only turns a validation batch's logits into predictions
is left alone.

Why it hurts training: without `dim` torch guesses the axis from the number of dimensions (0 for
a 1-D or 3-D tensor, 1 for 2-D or 4-D) and only warns. On a (batch, time, classes) tensor the guess
is the batch axis: each class is normalised across the samples of the batch instead of each
sample across its classes, so the probabilities depend on the other samples and do not sum to 1.

Example:
    probs = F.softmax(logits)

Use instead:
    probs = F.softmax(logits, dim=-1)
"""

import ast

from kb_tools.lint.analysis import keyword, within

CODE, NAME, ENTRY = "KBL019", "softmax-implicit-dim", "softmax-wrong-dim"
MESSAGE = "{what}; pass dim=-1 or the class axis"
IMPLICIT = "softmax without dim: torch guesses the axis (the batch axis for a 3-D tensor)"
BATCH_AXIS = "softmax over dim 0 right after a Linear layer: that is the batch axis, the classes are the last one"

FUNCTIONS = {"torch.nn.functional.softmax", "torch.nn.functional.log_softmax", "torch.nn.functional.softmin"}
MODULES = {"torch.nn.Softmax", "torch.nn.LogSoftmax", "torch.nn.Softmin"}


def _in_training(a, call) -> bool:
    """A softmax in a model's forward or in code that trains: one that only turns a validation
    batch's logits into predictions is left alone (on the usual 2-D logits torch's guess is right)."""
    fn = a.enclosing(call)
    if fn is None:
        return any(within(loop, call) and a.trains(loop) for scope in a.loop_scopes for loop in scope.loops)
    return fn.name == "forward" or a.trains(fn)


def check(a, emit):
    for call in a.index.calls:
        name = a.imp.canon(call.func)
        has_dim = any(k.arg == "dim" for k in call.keywords)
        if name in FUNCTIONS and len(call.args) < 2 and not has_dim and call.args and _in_training(a, call):
            emit(call, CODE, what=IMPLICIT)
        elif name in MODULES and not call.args and not has_dim:
            emit(call, CODE, what=IMPLICIT)
        elif a.imp.canon(call.func) == "torch.nn.Sequential":
            for before, layer in zip(call.args, call.args[1:]):   # nn.Linear(h, n), nn.Softmax(dim=0)
                dim = keyword(layer, "dim") if isinstance(layer, ast.Call) else None
                if dim is None and isinstance(layer, ast.Call) and layer.args:
                    dim = layer.args[0]
                if isinstance(layer, ast.Call) and a.imp.canon(layer.func) in MODULES and isinstance(before, ast.Call) \
                        and a.imp.canon(before.func) == "torch.nn.Linear" and isinstance(dim, ast.Constant) and dim.value == 0:
                    emit(layer, CODE, what=BATCH_AXIS)
