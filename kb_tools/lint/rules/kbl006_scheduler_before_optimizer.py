"""What it finds: a learning-rate scheduler's `step()` that comes before the optimizer's `step()` in
a loop body.

Why it hurts training: current torch expects `optimizer.step()` first and the scheduler's
`step()` after it. In the other order the schedule has already advanced once before any update
is made, so the run never trains at the schedule's first value (a warmup's starting rate, the
initial learning rate), and torch prints a UserWarning saying so.

Example:
    scheduler.step()
    optimizer.step()

Use instead:
    optimizer.step()
    scheduler.step()
"""
from kb_tools.lint.analysis import method_call

CODE, NAME, ENTRY = "KBL006", "scheduler-before-optimizer", "scheduler-step-order"
MESSAGE = "scheduler.step() runs before optimizer.step(): the first learning rate is skipped"


def check(a, emit):
    for scope in a.loop_scopes:
        for loop in scope.loops:
            body_calls = [c for stmt in loop.body for c in a.index.calls_in(stmt)]
            first_sched = next((c for c in body_calls if method_call(c, "step") is not None
                                and a.kinds.get(method_call(c, "step")) == "scheduler"), None)
            first_opt = next((c for c in body_calls if method_call(c, "step") is not None
                              and a.kinds.get(method_call(c, "step")) == "optimizer"), None)
            if first_sched is not None and first_opt is not None and \
                    (first_sched.lineno, first_sched.col_offset) < (first_opt.lineno, first_opt.col_offset):
                emit(first_sched, CODE)
