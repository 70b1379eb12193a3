"""What it finds: a learning-rate schedule sized in epochs (`StepLR(step_size=...)`,
`MultiStepLR(milestones=...)`, `CosineAnnealingLR(T_max=...)`, `PolynomialLR(total_iters=...)`,
`LinearLR(total_iters=...)`, `CosineAnnealingWarmRestarts(T_0=...)` whose size is read from a name that
says epoch: `args.epochs`, `max_epochs`, `[int(0.6 * num_epochs)]`) whose `step()` runs inside the batch
loop, where the optimizer steps on every pass. A loop over epochs that steps the optimizer once per pass
(full-batch training) is left alone, and so is a size that also counts batches or steps
(`T_max=epochs * len(loader)`). Also a schedule whose length divides the batches per epoch by the
epochs (`num_training_steps=len(train_loader) // n_epochs`) where the total is their product. And a
decay written with literal numbers (`StepLR(step_size=7, gamma=0.1)`, `MultiStepLR(milestones=[30, 60,
90])`, `ExponentialLR(gamma=0.95)`) stepped in the batch loop, when those numbers take the learning rate
to a thousandth of its start or below within the first 1,000 optimizer steps: sizes that
count epochs, read as batches. And, wherever it is stepped, such a decay given a literal `gamma=0`, which
sets the learning rate to exactly 0 at its first decay (a schedule meant to be switched off needs
`gamma=1`).

Why it hurts training: a scheduler moves one tick per `step()`. Sized in epochs and ticked per batch,
it runs through its whole schedule in the first `size` batches: a StepLR meant to divide the learning
rate by 10 every 30 epochs does it every 30 batches, so within an epoch or two the learning rate is
many orders of magnitude below its start and the loss goes flat.

Example:
    scheduler = StepLR(optimizer, step_size=args.epochs // 3, gamma=0.1)
    for epoch in range(args.epochs):
        for x, y in loader:
            ...
            optimizer.step()
            scheduler.step()

Use instead:
    for epoch in range(args.epochs):
        for x, y in loader:
            ...
            optimizer.step()
        scheduler.step()
"""
import ast

from kb_tools.lint.analysis import dotted

CODE, NAME, ENTRY = "KBL023", "epoch-schedule-stepped-per-batch", "lr-decay-too-early"
MESSAGE = "{what}"
PER_BATCH = ("{cls} is sized in epochs ({size}) but stepped here on every batch: it runs through its whole "
             "schedule in that many batches, so the learning rate decays to about zero early; step it once per epoch")
DIVIDED = ("the schedule's length {expr} divides the batches per epoch by the epochs instead of multiplying: it is "
           "{epochs} squared times too short, and every step after its end runs at its final learning rate")
SIZED = {"StepLR": ("step_size", 1), "MultiStepLR": ("milestones", 1), "CosineAnnealingLR": ("T_max", 1),
         "PolynomialLR": ("total_iters", 1), "LinearLR": ("total_iters", 3),
         "CosineAnnealingWarmRestarts": ("T_0", 1)}   # class -> (the size argument, its position)
COUNTS_STEPS = ("step", "iter", "batch", "len")
LITERAL_DECAYS = ("StepLR", "MultiStepLR", "ExponentialLR")
ZERO_GAMMA = ("{cls}(..., gamma={gamma}) multiplies the learning rate by {gamma} at its first decay, so every step "
              "after it updates nothing; to keep the learning rate constant use gamma=1 (or no scheduler)")
DECAY_HORIZON = 1000   # optimizer steps: any run that is more than a smoke test lasts that long
DECAY_FLOOR = 1e-3     # the learning rate as a share of its start, reached within DECAY_HORIZON steps
FAST_DECAY = ("{cls}({args}) is stepped here on every batch: within the first {horizon:,} batches it multiplies "
              "the learning rate by {factor:.0e}, so training goes flat early; numbers like these are set for "
              "epochs, so step it once per epoch (or size it in batches)")


def _epoch_size(a, expr) -> str | None:
    """The epoch-named name an expression reads (through names two levels), or None; None too when it
    also reads a step, iteration or batch count, or a len(...)."""
    reached = a.computed_from(expr)
    names = [dotted(n) or "" for n in reached if isinstance(n, (ast.Name, ast.Attribute))]
    calls = [dotted(n.func) or "" for n in reached if isinstance(n, ast.Call)]
    if any(word in name.rsplit(".", 1)[-1].lower() for name in names + calls for word in COUNTS_STEPS):
        return None
    return next((name for name in names if "epoch" in name.rsplit(".", 1)[-1].lower()), None)


def _epoch_loop(loop) -> bool:
    """A loop over epochs, by its target's name or what it iterates."""
    names = [dotted(n) or "" for n in ast.walk(loop.target if isinstance(loop, ast.For) else loop.test)
             if isinstance(n, (ast.Name, ast.Attribute))]
    if isinstance(loop, ast.For):
        names += [dotted(n) or "" for n in ast.walk(loop.iter) if isinstance(n, (ast.Name, ast.Attribute))]
    return any("epoch" in name.lower() for name in names)


def check(a, emit):
    for call in a.index.calls:
        built = a.scheduler_tick(call)
        if built is None:
            continue
        canon = a.imp.canon(built.func) or ""
        cls = canon.rsplit(".", 1)[-1]
        if cls not in SIZED and cls not in LITERAL_DECAYS or not canon.startswith("torch.optim.lr_scheduler."):
            continue
        size = None
        if cls in SIZED:
            size_expr = _argument(built, *SIZED[cls])
            size = _epoch_size(a, size_expr) if size_expr is not None else None
        factor = _literal_decay(built, cls) if size is None and cls in LITERAL_DECAYS else None
        if size is None and (factor is None or factor > DECAY_FLOOR * (1 + 1e-9)):  # 0.1 ** 3 is 1.0000000000000002e-3
            continue
        loop = a.innermost_loop(call)
        if loop is None or _epoch_loop(loop) or not a.steps_in(loop, False):
            continue
        if size is not None:
            emit(call, CODE, what=PER_BATCH.format(cls=cls, size=size))
        else:
            written = ", ".join([ast.unparse(x) for x in built.args[1:]] + [ast.unparse(k) for k in built.keywords])
            emit(call, CODE, what=FAST_DECAY.format(cls=cls, args=written, horizon=DECAY_HORIZON, factor=factor))
    _divided_by_epochs(a, emit)
    _zero_gamma(a, emit)


def _zero_gamma(a, emit):
    """A StepLR, MultiStepLR or ExponentialLR built with a literal gamma of 0 (or below)."""
    for built in a.index.calls:
        canon = a.imp.canon(built.func) or ""
        cls = canon.rsplit(".", 1)[-1]
        if cls not in LITERAL_DECAYS or not canon.startswith("torch.optim.lr_scheduler."):
            continue
        gamma = _number(_argument(built, "gamma", 1 if cls == "ExponentialLR" else 2))
        if gamma is not None and gamma <= 0:
            emit(built, CODE, what=ZERO_GAMMA.format(cls=cls, gamma=gamma))


def _number(node):
    """The value of an int or float literal (a negative one too), or None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _number(node.operand)
        return None if value is None else -value
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    return None


def _argument(built, name: str, position: int):
    """A constructor's argument by keyword or position (the optimizer is position 0), or None."""
    found = next((k.value for k in built.keywords if k.arg == name), None)
    if found is None and len(built.args) > position:
        found = built.args[position]
    return found


def _literal_decay(built, cls: str) -> float | None:
    """The factor a StepLR, MultiStepLR or ExponentialLR written with literal numbers applies to the
    learning rate over DECAY_HORIZON steps; None when a number is not a literal or there is no decay."""
    default = None if cls == "ExponentialLR" else 0.1
    gamma_node = _argument(built, "gamma", 1 if cls == "ExponentialLR" else 2)
    gamma = default if gamma_node is None else _number(gamma_node)
    if gamma is None or not 0 < gamma < 1:
        return None
    if cls == "ExponentialLR":
        return gamma ** DECAY_HORIZON
    if cls == "StepLR":
        size = _number(_argument(built, "step_size", 1))
        return gamma ** (DECAY_HORIZON // size) if isinstance(size, int) and size > 0 else None
    milestones = _argument(built, "milestones", 1)
    if not isinstance(milestones, (ast.List, ast.Tuple)) or not milestones.elts:
        return None
    values = [_number(m) for m in milestones.elts]
    if any(not isinstance(v, int) for v in values):
        return None
    return gamma ** sum(1 for v in values if v <= DECAY_HORIZON)


def _divided_by_epochs(a, emit):
    """A scheduler whose size is `len(loader) // epochs` (or `/`), read directly or through names: the
    total number of steps is the product of the two."""
    for built in a.index.calls:
        if a.kind_of(built) != "scheduler":
            continue
        for expr in list(built.args[1:]) + [k.value for k in built.keywords]:
            found = _division(a, expr)
            if found is not None:
                emit(built, CODE, what=DIVIDED.format(expr=ast.unparse(found), epochs=dotted(found.right) or "epochs"))
                break


def _division(a, expr):
    """The `len(loader) / epochs` division inside `expr` (through names two levels), or None."""
    return next((node for node in a.computed_from(expr, attributes=False) if isinstance(node, ast.BinOp)
                 and isinstance(node.op, (ast.Div, ast.FloorDiv)) and a.sized_in_batches(node.left)
                 and any(_epoch_count(n) for n in ast.walk(node.right))), None)


def _epoch_count(node) -> bool:
    """A name for a number of epochs: `n_epochs`, `args.num_train_epochs`; not `steps_per_epoch`."""
    last = (dotted(node) or "").rsplit(".", 1)[-1].lower() if isinstance(node, (ast.Name, ast.Attribute)) else ""
    return "epoch" in last and not any(word in last for word in ("per_epoch", "step", "batch", "iter"))
