"""What it finds: an optimizer constructed (and assigned) inside a training loop, one that is not
nested in another loop and calls `backward()`, itself or through the function it hands the new
optimizer to (`for epoch ...: opt = Adam(...); train(model, opt, loader)`), unless each pass
trains a fresh model (the model rebuilt or re-initialised in the loop, or a loop over runs, folds,
trials or seeds); or a training function of the file that builds its own optimizer over the
parameters of a model it is given, reads from the module or holds on `self`, called in a loop
with the same model each time (`for epoch in ...: train(model, loader)`, `self.train_epoch()`)
and not handed that optimizer. Plain SGD without momentum keeps no state and is left alone.

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

from kb_tools.lint.analysis import BACKWARD, dotted, keyword, method_call, within

CODE, NAME, ENTRY = "KBL015", "optimizer-created-in-loop", "optimizer-recreated-each-epoch"
MESSAGE = ("the optimizer is created inside the training loop: its state (momentum, Adam moments) restarts every "
           "iteration")


def check(a, emit):
    for scope in a.loop_scopes:
        for loop in scope.loops:
            if id(loop) in scope.inner:
                continue
            calls = a.index.calls_in(loop)
            if a.trains(loop) and not _fresh_model_each_pass(a, loop, calls):
                for c in calls:   # backward() here or in a function the loop calls with the new optimizer
                    if a.kind_of(c) == "optimizer" and id(c) in a.assigned and not _stateless(a, c):
                        emit(c, CODE)
            if any(method_call(c, *BACKWARD) is not None for c in calls):
                continue
            for call in calls:
                for built in _rebuilt_per_call(a, loop, call):
                    emit(built, CODE)


REPEATS = ("run", "fold", "trial", "seed", "rep", "repeat", "split", "exp", "experiment", "cv", "restart")


def _stateless(a, call) -> bool:
    """Plain SGD with no momentum keeps no state between steps: building it again loses nothing."""
    if not (a.imp.canon(call.func) or "").endswith(".SGD"):
        return False
    momentum = keyword(call, "momentum")
    return momentum is None or (isinstance(momentum, ast.Constant) and momentum.value == 0)


def _fresh_model_each_pass(a, loop, calls) -> bool:
    """Whether each pass of `loop` trains a fresh model, so a fresh optimizer is right: the model an
    optimizer built here is given is assigned in the loop or re-initialised (`reset_parameters()`),
    or the loop counts runs, folds, trials or seeds (`for run in range(args.runs):`)."""
    target = {n.id.lower() for n in ast.walk(loop.target) if isinstance(n, ast.Name)} if isinstance(loop, ast.For) else set()
    if any(t == w or t.startswith(w + "_") or t.endswith("_" + w) for t in target for w in REPEATS):
        return True
    for c in calls:
        owners = a.parameter_owners(c) if a.kind_of(c) == "optimizer" else []
        if owners and all(a.assigned_within(o.split(".")[0], loop) or any(
                method_call(r, "reset_parameters", "init_weights", "apply") == o for r in calls) for o in owners):
            return True
    return False


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
    params = {p.arg for p in fn.args.args + fn.args.kwonlyargs}
    out = []
    for c in owner.index.calls_in(fn):
        if owner.kind_of(c) != "optimizer" or id(c) not in owner.assigned or _stateless(owner, c):
            continue
        if owner.assigned[id(c)] in given:
            continue   # the caller hands its own optimizer in: the one built here is only a default
        if any(_same_model_each_call(a, owner, fn, loop, call, given, params, root) for root in owner.parameter_owners(c)):
            out.append(c)
    return out


def _same_model_each_call(a, owner, fn, loop, call, given, params, root: str) -> bool:
    """Whether the model an optimizer built in `fn` is given (`root`, as `fn` names it) is the same
    object on every call from `loop`: an argument the loop passes under a name it never assigns, the
    object the method is called on (`self.model` in `self.train_epoch()`), or a module-level model
    the function reads. A new model per iteration (cross-validation folds, trials) is left alone."""
    base = root.split(".")[0]
    if base in given:
        model = given[base]
        return isinstance(model, ast.Name) and not a.assigned_within(model.id, loop)
    if base == "self":
        receiver = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
        return receiver is not None and not a.assigned_within(receiver.split(".")[0], loop) \
            and not owner.assigned_within(root, fn)
    return base not in params and not owner.assigned_within(base, fn) and not a.assigned_within(base, loop)
