"""What it finds: an optimizer constructed (and assigned) inside a training loop, one that is not
nested in another loop and calls `backward()`.

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
from kb_tools.lint.analysis import BACKWARD, method_call

CODE, NAME, ENTRY = "KBL015", "optimizer-created-in-loop", "optimizer-recreated-each-epoch"
MESSAGE = ("the optimizer is created inside the training loop: its state (momentum, Adam moments) restarts every "
           "iteration")


def check(a, emit):
    for scope in a.loop_scopes:
        for loop in scope.loops:
            if id(loop) in scope.inner:
                continue
            calls = a.index.calls_in(loop)
            if not any(method_call(c, *BACKWARD) is not None for c in calls):
                continue
            for c in calls:
                if a.kind_of(c) == "optimizer" and id(c) in a.assigned:
                    emit(c, CODE)
