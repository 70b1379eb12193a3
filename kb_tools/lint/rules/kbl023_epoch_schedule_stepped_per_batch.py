"""What it finds: a learning-rate schedule sized in epochs (`StepLR(step_size=...)`,
`MultiStepLR(milestones=...)`, `CosineAnnealingLR(T_max=...)`, `PolynomialLR(total_iters=...)`,
`LinearLR(total_iters=...)`, `CosineAnnealingWarmRestarts(T_0=...)` whose size is read from a name that
says epoch: `args.epochs`, `max_epochs`, `[int(0.6 * num_epochs)]`) whose `step()` runs inside the batch
loop, where the optimizer steps on every pass. A loop over epochs that steps the optimizer once per pass
(full-batch training) is left alone, and so is a size that also counts batches or steps
(`T_max=epochs * len(loader)`). Also a schedule whose length divides the batches per epoch by the
epochs (`num_training_steps=len(train_loader) // n_epochs`) where the total is their product.

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
        cls = (a.imp.canon(built.func) or "").rsplit(".", 1)[-1]
        if cls not in SIZED or not (a.imp.canon(built.func) or "").startswith("torch.optim.lr_scheduler."):
            continue
        keyword_name, position = SIZED[cls]
        size_expr = next((k.value for k in built.keywords if k.arg == keyword_name), None)
        if size_expr is None and len(built.args) > position:
            size_expr = built.args[position]
        size = _epoch_size(a, size_expr) if size_expr is not None else None
        if size is None:
            continue
        loop = a.innermost_loop(call)
        if loop is not None and not _epoch_loop(loop) and a.steps_in(loop, False):
            emit(call, CODE, what=PER_BATCH.format(cls=cls, size=size))
    _divided_by_epochs(a, emit)


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
