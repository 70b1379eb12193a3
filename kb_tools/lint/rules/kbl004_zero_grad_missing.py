"""What it finds: a training loop that calls `backward()` and an optimizer's `step()` while nothing
in its scope zeroes the gradients (no `zero_grad()`, no `p.grad = None`, no helper that does).

Why it hurts training: `backward()` adds to `.grad`; without zeroing, every step applies the sum
of all gradients so far, so the effective learning rate grows with the step count and the run
diverges or oscillates.

Example:
    for x, y in loader:
        loss_fn(model(x), y).backward()
        opt.step()

Use instead:
    for x, y in loader:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
"""
from kb_tools.lint.analysis import method_call

CODE, NAME, ENTRY = "KBL004", "zero-grad-missing", "optimizer-step-order"
MESSAGE = "the loop calls backward() and step() but gradients are never zeroed: they accumulate across steps"


def check(a, emit):
    for scope in a.loop_scopes:
        if scope.zeroes:
            continue
        for loop in scope.loops:
            if id(loop) in scope.inner:
                continue
            calls = a.index.calls_in(loop)
            backward = [c for c in calls if method_call(c, "backward") is not None]
            if backward and any(a.optimizer_step(c) for c in calls):
                emit(backward[0], CODE)
