"""What it finds: a learning-rate scheduler's `step()` that comes before the optimizer's `step()` in
a loop body (the optimizer's own `step()`, one in a function of the file the loop calls, or a call
that is handed the scheduler's optimizer: `train(model, loader, optimizer)`), or at the top of a
function that steps the optimizer after it (a per-epoch `train_epoch()`, a wrapper's `step()`);
or, in a loop body, a scheduler's `step()` on every pass while the optimizer steps only under an
accumulation condition (an `if` whose test holds a modulo or a name that says accumulation).
Also a schedule sized in batches (`OneCycleLR(..., steps_per_epoch=...)`, or a `T_max` or
`num_training_steps` computed from `len(loader)`) whose `step()` runs once per epoch: in a loop
whose optimizer steps only in an inner loop or in a called function's loop, or after the batch
loop of a per-epoch function; and, in a Lightning module, a per-step schedule (OneCycleLR, CyclicLR,
a transformers warmup factory, or one sized from the trainer's step count or a loader) that
`configure_optimizers` returns with no `"interval"` key, so Lightning ticks it once per epoch.
Schedulers and optimizers are known by how they were built or, when that is out of sight (a
parameter, an attribute set elsewhere), by a name that says sched or optim; a `step(epoch)` or
`step(metric)`, which sets the schedule's position itself, is left alone.

Why it hurts training: current torch expects `optimizer.step()` first and the scheduler's
`step()` after it. In the other order the schedule has already advanced once before any update
is made, so the run never trains at the schedule's first value (a warmup's starting rate, the
initial learning rate), and torch prints a UserWarning saying so. A schedule sized in batches and
ticked per epoch moves one batch's worth per epoch: its warmup or decay barely starts.

Example:
    scheduler.step()
    optimizer.step()

Use instead:
    optimizer.step()
    scheduler.step()
"""
import ast

from kb_tools.lint.analysis import THIRD_PARTY, dotted, keyword, method_call, within

CODE, NAME, ENTRY = "KBL006", "scheduler-before-optimizer", "scheduler-step-order"
MESSAGE = "scheduler.step() {how}"
BEFORE = "runs before optimizer.step(): the first learning rate is skipped"
EVERY_BATCH = ("runs on every batch while optimizer.step() runs only under the accumulation condition: the "
               "schedule ticks once per micro-batch, so a warmup or decay sized in updates ends that many times too early")

PER_EPOCH = ("runs once per epoch while its schedule is sized in batches ({size}): each epoch moves it by one "
             "batch's worth, so its warmup or decay barely starts")

LIGHTNING_EPOCH = ("is left to Lightning, which ticks a scheduler once per epoch unless configure_optimizers returns it "
                   "with \"interval\": \"step\"; this one is a per-step schedule ({why}), so it barely moves")


def _optimizer_of(a, scheduler: str) -> str | None:
    """The optimizer a scheduler was built on: `StepLR(opt, ...)` -> "opt"."""
    value = a.values.get(scheduler)
    if isinstance(value, ast.Call):
        arg = value.args[0] if value.args else keyword(value, "optimizer")
        return dotted(arg) if arg is not None else None
    return None


def _steps_optimizer(a, call, optimizer) -> bool:
    """Whether a call steps an optimizer: `opt.step()`, `scaler.step(opt)`, or a call of a function
    that is handed the scheduler's optimizer (`train(model, loader, optimizer=opt)`), which steps it."""
    if a.steps_optimizer(call):
        return True
    if optimizer and method_call(call, "step", "zero_grad", "state_dict", "load_state_dict") is None:
        library = (a.imp.canon(call.func) or "").split(".")[0] in ("torch", "accelerate", "lightning") + THIRD_PARTY
        return not library and any(dotted(arg) == optimizer for arg in list(call.args) + [k.value for k in call.keywords])
    return False   # a library call handed the optimizer (amp.scale_loss, amp.master_params) does not step it


def _function_steps(a, emit):
    """A function whose body steps its scheduler (at its top level) before the optimizer steps in it:
    an optimizer-and-scheduler wrapper (`def step(self): self.scheduler.step(); self.optimizer.step()`)
    or a per-epoch `train_epoch()` that steps the scheduler before its batch loop. Optimizers and
    schedulers are known by kind or by name."""
    for fn in a.index.of(ast.FunctionDef, ast.AsyncFunctionDef):
        top = [c for stmt in fn.body if not isinstance(stmt, (ast.For, ast.While, ast.If, ast.Try))
               for c in a.index.calls_in(stmt)]
        sched = next((c for c in top if method_call(c, "step") and a.is_scheduler(method_call(c, "step"))), None)
        if sched is None:
            continue
        calls = [c for stmt in fn.body for c in a.run_calls(stmt)]
        opt = next((c for c in calls if a.steps_optimizer(c)), None)
        if opt is not None and calls.index(sched) < calls.index(opt):
            emit(sched, CODE, how=BEFORE)


def _accumulation_test(a, test, depth: int = 0) -> bool:
    """An `if` test that reads as the accumulation condition: `(i + 1) % accum == 0`, `if accumulate_done:`,
    or a name assigned such a test (`sync = step % k == 0; if sync:`)."""
    for node in ast.walk(test):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return True
        name = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if name and "accum" in name.lower():
            return True
        if name and depth < 1 and any(_accumulation_test(a, value, depth + 1) for _, value, _ in a.history.get(name, [])):
            return True
    return False


def _steps(a, statements) -> bool:
    return any(a.steps_optimizer(c) for stmt in statements for c in a.index.calls_in(stmt))


def _per_batch_under_accumulation(a, emit):
    """A loop body whose `if <accumulation>:` steps the optimizer while a statement of the body
    itself, outside any condition, steps a scheduler (by kind or by name)."""
    for scope in a.loop_scopes:
        for loop in scope.loops:
            gated = [stmt for stmt in loop.body if isinstance(stmt, ast.If) and _accumulation_test(a, stmt.test)
                     and _steps(a, stmt.body) != _steps(a, stmt.orelse)]   # `if accumulating: ... else: step`
            if not gated:
                continue
            for stmt in loop.body:
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                        and method_call(stmt.value, "step") and a.is_scheduler(method_call(stmt.value, "step")):
                    emit(stmt.value, CODE, how=EVERY_BATCH)


def _ticked_per_epoch(a, emit):
    """A schedule sized in batches (`OneCycleLR(..., steps_per_epoch=len(loader))`, `T_max` or
    `num_training_steps` computed from `len(loader)`) whose `step()` runs where the batches have
    already been iterated: in a loop whose optimizer steps only in an inner loop (or in a called
    function's loop), or after the batch loop of a per-epoch function."""
    for call in a.index.calls:
        built = a.scheduler_tick(call)
        if built is None:
            continue
        canon = a.imp.canon(built.func) or ""
        size = "steps_per_epoch" if canon.endswith("OneCycleLR") and keyword(built, "steps_per_epoch") is not None \
            else next(filter(None, (a.sized_in_batches(e) for e in list(built.args[1:]) + [
                k.value for k in built.keywords if k.arg != "optimizer"])), None)
        if size is None:
            continue
        loop = a.innermost_loop(call)
        if loop is not None:   # the innermost loop around the tick steps only in its inner loops or called loops
            per_epoch = a.steps_in(loop, True) and not a.steps_in(loop, False)
        else:                  # a per-epoch function: the tick after a loop that steps on every pass
            fn = a.enclosing(call)
            per_epoch = fn is not None and not a.steps_in(fn, False) and any(
                a.enclosing(n) is fn and (n.end_lineno or 0) < call.lineno and a.steps_in(n, False)
                for n in a.index.of(ast.For, ast.While))
        if per_epoch:
            emit(call, CODE, how=PER_EPOCH.format(size=size))


def _step_schedule(a, built) -> str | None:
    """What makes a scheduler built in configure_optimizers a per-step one: its class (OneCycleLR,
    CyclicLR, a transformers warmup factory) or a size read from the trainer's step count or a loader."""
    canon = a.imp.canon(built.func) or dotted(built.func) or ""
    last = canon.rsplit(".", 1)[-1]
    if last in ("OneCycleLR", "CyclicLR") or (last.startswith("get_") and "schedule" in last):
        return last
    exprs = list(built.args[1:]) + [k.value for k in built.keywords]
    holder = a.enclosing(built)
    local = {fn.name: fn for fn in a.index.of(ast.FunctionDef) if holder is not None and fn is not holder
             and within(holder, fn)}
    exprs += [local[e.id] for e in exprs if isinstance(e, ast.Name) and e.id in local]   # LambdaLR(opt, lr_lambda)
    for expr in exprs:
        found = _step_count(a, expr) or a.sized_in_batches(expr)
        if found:
            return found
    return None


def _step_count(a, expr) -> str | None:
    """A name counting optimizer steps that `expr` reads (`self.hparams.max_steps`, `warmup_steps`,
    `trainer.estimated_stepping_batches`), through names one level."""
    names = [(dotted(n) or "").rsplit(".", 1)[-1] for n in a.computed_from(expr, 1, attributes=False)
             if isinstance(n, (ast.Name, ast.Attribute))]
    return next((n for n in names if n.endswith("_steps") or n == "estimated_stepping_batches"), None)


def _lightning_interval(a, emit):
    """A LightningModule's configure_optimizers that returns a per-step schedule with no
    `"interval": "step"` anywhere in it: Lightning's default interval is the epoch."""
    if "lightning" not in a.text or any(method_call(c, "configure_optimizers") for c in a.index.calls):
        return   # not Lightning, or a loop of the file's own that takes the schedulers and steps them
    for fn in a.index.of(ast.FunctionDef):
        if fn.name != "configure_optimizers":
            continue
        intervals = [v for d in a.index.of(ast.Dict) if within(fn, d)
                     for k, v in zip(d.keys, d.values) if isinstance(k, ast.Constant) and k.value == "interval"]
        if intervals:
            continue   # set, to "step" or to something this reading cannot see
        for c in a.index.calls_in(fn):
            if a.kind_of(c) == "scheduler" and (why := _step_schedule(a, c)):
                emit(c, CODE, how=LIGHTNING_EPOCH.format(why=why))
                break


def check(a, emit):
    _function_steps(a, emit)
    _per_batch_under_accumulation(a, emit)
    _ticked_per_epoch(a, emit)
    _lightning_interval(a, emit)
    for scope in a.loop_scopes:
        for loop in scope.loops:
            own = [c for stmt in loop.body for c in a.index.calls_in(stmt)]
            first_sched = next((c for c in own if method_call(c, "step") is not None and not c.args
                                and not c.keywords and a.is_scheduler(method_call(c, "step"))), None)
            if first_sched is None:
                continue
            optimizer = _optimizer_of(a, method_call(first_sched, "step"))
            calls = [c for stmt in loop.body for c in a.run_calls(stmt)]
            first_opt = next((c for c in calls if _steps_optimizer(a, c, optimizer)), None)
            if first_opt is not None and calls.index(first_sched) < calls.index(first_opt):
                emit(first_sched, CODE, how=BEFORE)
