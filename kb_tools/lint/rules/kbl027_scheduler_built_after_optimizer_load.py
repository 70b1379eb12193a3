"""What it finds: in one function (or at module level), `optimizer.load_state_dict(...)` followed by
the construction of a scheduler on that optimizer that writes its first learning rate when it is
built (torch's `LambdaLR`, `OneCycleLR`, `LinearLR`; the warmup and decay factories of transformers,
which build a LambdaLR), from the start of its schedule (no `last_epoch` other than -1), where the
function never loads that scheduler's own state and writes no `initial_lr` of its own. Loading a
model's weights, a scheduler built before the optimizer's state is loaded, a schedule that does not
move the lr when built (`StepLR`, `CosineAnnealingLR`, a constant schedule) and a new `initial_lr`
set on purpose are left alone.

Why it hurts training: `load_state_dict` restores the checkpoint's `lr` and `initial_lr` into every
param group. A scheduler built after it starts its schedule again from the loaded `initial_lr` and
overwrites the restored lr at once: a resumed run drops back to the start of its warmup (often lr 0)
or jumps back to the peak, instead of continuing where it stopped.

Example:
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler = LambdaLR(optimizer, lr_lambda=warmup_then_decay)

Use instead:
    scheduler = LambdaLR(optimizer, lr_lambda=warmup_then_decay)
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
"""
import ast

from kb_tools.lint.analysis import dotted, keyword, method_call

CODE, NAME, ENTRY = "KBL027", "scheduler-built-after-optimizer-load", "lr-not-restored-after-load"
MESSAGE = ("{scheduler} is built after optimizer.load_state_dict() (line {line}) and writes its first learning "
           "rate over the restored one: the resumed run restarts its schedule; build the scheduler first and "
           "load its state too")

# Schedules that set the lr from initial_lr as soon as they are built
WRITES_ON_BUILD = {"LambdaLR", "OneCycleLR", "LinearLR", "get_linear_schedule_with_warmup",
                   "get_cosine_schedule_with_warmup", "get_constant_schedule_with_warmup",
                   "get_polynomial_decay_schedule_with_warmup", "get_cosine_with_hard_restarts_schedule_with_warmup",
                   "get_inverse_sqrt_schedule", "get_wsd_schedule", "get_scheduler"}


def check(a, emit):
    for scope in a.index.scopes():
        holder = None if scope is a.tree else scope   # a.enclosing: None at module level
        calls = [c for c in a.index.calls_in(scope) if a.enclosing(c) is holder]
        loads = [(c, method_call(c, "load_state_dict")) for c in calls]
        loads = [(c, r) for c, r in loads if r is not None]
        for load, receiver in loads:
            if not a.optimizer_named(receiver):
                continue
            for built in calls:
                if built.lineno <= load.lineno or not _writes_on_build(a, built):
                    continue
                target = built.args[0] if built.args else keyword(built, "optimizer")
                if target is None or dotted(target) != receiver or _resumes_its_position(built):
                    continue
                name = a.assigned.get(id(built))
                if name is not None and any(method_call(c, "load_state_dict") == name for c in calls):
                    continue
                if _writes_initial_lr(scope):
                    continue
                emit(built, CODE, scheduler=_short(a, built), line=load.lineno)


def _writes_on_build(a, call) -> bool:
    name = a.imp.canon(call.func) or ""
    return a.kind_of(call) == "scheduler" and name.rsplit(".", 1)[-1] in WRITES_ON_BUILD


def _resumes_its_position(call) -> bool:
    """Built with last_epoch set (anything but the literal -1): the schedule continues, it does not restart."""
    last = keyword(call, "last_epoch")
    if last is None:
        return False
    return not (isinstance(last, ast.UnaryOp) and isinstance(last.op, ast.USub)
                and isinstance(last.operand, ast.Constant) and last.operand.value == 1)


def _writes_initial_lr(scope) -> bool:
    """`group["initial_lr"] = ...` in this scope: a new base set by hand, the way to change a resumed lr."""
    for node in ast.walk(scope):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant) \
                            and sub.slice.value == "initial_lr":
                        return True
    return False


def _short(a, call) -> str:
    return (a.imp.canon(call.func) or dotted(call.func) or "the scheduler").rsplit(".", 1)[-1]
