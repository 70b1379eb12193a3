"""What it finds: `model.eval()` (or a helper defined in the file that calls `.eval()` and never
`.train()`) inside an outer training loop that never calls `.train()` again.

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

from kb_tools.lint.analysis import method_call

CODE, NAME, ENTRY = "KBL007", "eval-without-train", "train-eval-mode"
MESSAGE = ("{what} puts the model in eval mode inside the training loop and nothing calls .train() again: "
           "later epochs train with dropout off and BatchNorm frozen")


def check(a, emit):
    for scope in a.loop_scopes:
        for loop in scope.outer:
            if not a.index.trains(loop):
                continue
            calls = a.index.calls_in(loop)
            if any(method_call(c, "train") is not None for c in calls):
                continue
            for c in calls:
                if method_call(c, "eval") is not None:
                    emit(c, CODE, what=f"{method_call(c, 'eval') or 'the model'}.eval()")
                    break
                if isinstance(c.func, ast.Name) and c.func.id in a.evaluators:
                    emit(c, CODE, what=f"{c.func.id}()")
                    break
