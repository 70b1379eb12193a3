"""What it finds: `next(iter(loader))` inside a training loop (one that calls `backward()`, itself
or through a function of the file it calls, such as `self.train_step(x, cond)`).

Why it hurts training: each `iter(loader)` starts a new pass over the loader, so every step takes
the first batch of a fresh pass: without shuffling it is the same batch every step, and the
model memorises it while the validation loss does not move.

Example:
    for step in range(steps):
        x, y = next(iter(train_loader))

Use instead:
    batches = iter(train_loader)
    for step in range(steps):
        x, y = next(batches)   # or: for x, y in train_loader
"""
import ast

CODE, NAME, ENTRY = "KBL013", "next-iter-in-loop", "same-batch-every-step"
MESSAGE = ("next(iter(loader)) inside the loop starts a new pass over the loader every step: without shuffling "
           "it is the same first batch each time")


def _loop_targets(loops) -> set:
    """Names a for loop binds (`for step, batch in ...`): an element of what is iterated, such as a
    batch dict whose first key `next(iter(batch))` reads, not a loader."""
    return {n.id for loop in loops if isinstance(loop, ast.For) for n in ast.walk(loop.target) if isinstance(n, ast.Name)}


def check(a, emit):
    for scope in a.loop_scopes:
        elements = _loop_targets(scope.loops)
        for loop in scope.loops:
            if not a.trains(loop):   # backward() here or in a function the loop calls (self.train_step(x))
                continue
            for c in a.index.calls_in(loop):
                if isinstance(c.func, ast.Name) and c.func.id == "next" and c.args and \
                        isinstance(c.args[0], ast.Call) and isinstance(c.args[0].func, ast.Name) \
                        and c.args[0].func.id == "iter" and c.args[0].args \
                        and not (isinstance(c.args[0].args[0], ast.Name) and c.args[0].args[0].id in elements) \
                        and not isinstance(c.args[0].args[0], (ast.Dict, ast.List, ast.Tuple, ast.Set)):
                    emit(c, CODE)
