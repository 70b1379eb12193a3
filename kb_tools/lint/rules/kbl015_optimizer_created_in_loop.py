"""What it finds: an optimizer constructed (and assigned) inside a training loop, one that is not
nested in another loop and calls `backward()`; or a training function of the file that builds its own
optimizer over the parameters of a model it is given, called in a loop with the same model each
time (`for epoch in ...: train(model, loader)`) and not handed that optimizer.

Why it hurts training: a new optimizer starts with empty state: momentum and Adam's moments
restart every iteration, and the first Adam steps are the bias-corrected, full-size ones, so
the run behaves like one with no momentum and a noisy, too-large step.

Example:
    for x, y in loader:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        ...

Use instead:
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for x, y in loader:
        ...
"""
import ast

from kb_tools.lint.analysis import BACKWARD, dotted, method_call, within

CODE, NAME, ENTRY = "KBL015", "optimizer-created-in-loop", "optimizer-recreated-each-epoch"
MESSAGE = ("the optimizer is created inside the training loop: its state (momentum, Adam moments) restarts every "
           "iteration")


def check(a, emit):
    for scope in a.loop_scopes:
        for loop in scope.loops:
            if id(loop) in scope.inner:
                continue
            calls = a.index.calls_in(loop)
            if any(method_call(c, *BACKWARD) is not None for c in calls):
                for c in calls:
                    if a.kind_of(c) == "optimizer" and id(c) in a.assigned:
                        emit(c, CODE)
                continue
            for call in calls:
                for built in _rebuilt_per_call(a, loop, call):
                    emit(built, CODE)


def _rebuilt_per_call(a, loop, call) -> list:
    """The optimizers a function called in `loop` builds on each call over a model the call passes
    in, where that argument is the same object every iteration (a name the loop never assigns)
    and the optimizer is not passed in by the call: each call starts the optimizer afresh."""
    fn = a.callee(call)
    if fn is None or within(fn, loop):
        return []
    owner = a.owner_of(fn)
    if not owner.trains(fn):
        return []
    given = a.bound_arguments(call, fn)
    out = []
    for c in owner.index.calls_in(fn):
        if owner.kind_of(c) != "optimizer" or id(c) not in owner.assigned or not c.args:
            continue
        params = c.args[0]   # model.parameters(), model.net.parameters()
        root = dotted(params.func.value) if isinstance(params, ast.Call) and isinstance(params.func, ast.Attribute) else None
        model = given.get((root or "").split(".")[0])
        if not isinstance(model, ast.Name) or a.assigned_within(model.id, loop):
            continue   # a new model per iteration (cross-validation folds, trials) gets a new optimizer
        if owner.assigned[id(c)] in given:
            continue   # the caller hands its own optimizer in: the one built here is only a default
        out.append(c)
    return out
