"""What it finds: a training loop (the epoch loop, or a batch loop that validates every N steps) that
runs `.eval()` (or `.train(False)`), itself or through the file's own functions and methods it
calls (a `validate()` method, a model's `val_start()`), while nothing it runs calls `.train()`
again. Left alone: an EMA copy, a teacher or a target network put in eval mode (not the model
being trained); a part frozen on purpose (`requires_grad_(False)` on it in the same loop); and a
function's parameter when the caller may pass such a copy (`test(test_model)` after `test_model =
ema.ema` on one branch), since the rule cannot prove the trained model is the one switched.

Why it hurts training: after the first evaluation every later epoch trains with dropout off and
BatchNorm using (and no longer updating) its running statistics, so regularisation is gone and
the statistics drift from the data the model now sees.

Example:
    for epoch in range(epochs):
        for x, y in train_loader:
            ...
        model.eval()
        validate(model)

Use instead:
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            ...
        model.eval()
        validate(model)
"""

import ast

from kb_tools.lint.analysis import dotted, method_call, to_eval_mode

CODE, NAME, ENTRY = "KBL007", "eval-without-train", "train-eval-mode"
MESSAGE = ("{what} puts the model in eval mode inside the training loop and nothing calls .train() again: "
           "later epochs train with dropout off and BatchNorm frozen")


NOT_TRAINED = ("ema", "teacher", "target", "shadow", "swa", "average", "avg", "frozen", "old", "ref")


def _trained_elsewhere(a, receiver: str) -> bool:
    """Whether `.eval()` is called on a model the optimizers visibly do not train: an EMA copy, a
    teacher, a target network, or a model that is not among the known owners of the optimizers."""
    last = receiver.rsplit(".", 1)[-1].lower()
    if any(word in last for word in NOT_TRAINED):
        return True
    owners = {a.optimizer_owner(name) for name, kind in a.kinds.items() if kind == "optimizer"} - {None, ""}
    if any(o.startswith(receiver + ".") for o in owners):
        return False   # Adam([{"params": model.encoder.parameters()}, ...]) trains model
    held = a.values.get(receiver)
    if held is not None and any(a.values.get(o) is held for o in owners):
        return False   # a parameter `model` that every caller passes the trained `net`
    return bool(owners) and not receiver.startswith("self.") and receiver not in owners and \
        last not in {o.rsplit(".", 1)[-1].lower() for o in owners}


def _maybe_copy(a, where, evals) -> bool:
    """Whether the eval reached through the call `where` switches a parameter of the function it is
    in, and what `where` passes for it was, on some assignment, an EMA copy, a teacher or a target
    network: `test_model = ema_model.ema if ... else model` cannot prove the trained model is evaluated."""
    for inner in evals:
        fn = a.enclosing(inner)
        receiver = to_eval_mode(inner)
        if fn is None or receiver is None or a.callee(where) is not fn:
            continue
        passed = a.bound_arguments(where, fn).get(receiver)
        names = [dotted(passed)] if dotted(passed) else []
        values = [value for name in names for _, value, _ in a.history.get(name, [])] + [passed]
        values = [side for v in values if v is not None
                  for side in ((v.body, v.orelse) if isinstance(v, ast.IfExp) else (v,))]
        if any(_trained_elsewhere(a, dotted(v) or "") for v in values if dotted(v)):
            return True
    return False


def check(a, emit):
    for scope in a.loop_scopes:
        for loop in scope.loops:
            if not a.trains(loop):
                continue
            calls = a.run_calls(loop)
            if any(method_call(c, "train") is not None and to_eval_mode(c) is None for c in calls):
                continue
            frozen = {method_call(c, "requires_grad_") for c in calls if method_call(c, "requires_grad_")
                      and c.args and isinstance(c.args[0], ast.Constant) and c.args[0].value is False}
            evals = [c for c in calls if to_eval_mode(c) is not None and to_eval_mode(c) not in frozen
                     and not _trained_elsewhere(a, to_eval_mode(c) or "")]   # `m.requires_grad_(False)`: frozen
            if not evals:
                continue
            own = a.index.calls_in(loop)
            where = next((c for c in own if c in evals or (a.callee(c) is not None and any(
                e in evals for e in a.run_calls(c)))), None)   # the call that leads there, not print(validate())
            if where is None:
                continue
            if where not in evals and _maybe_copy(a, where, evals):
                continue
            if where in evals:
                how = "eval()" if method_call(where, "eval") is not None else "train(False)"
                emit(where, CODE, what=f"{to_eval_mode(where) or 'the model'}.{how}")
            else:
                emit(where, CODE, what=f"{dotted(where.func) or 'a call'}()")
