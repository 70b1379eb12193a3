"""What it finds: a training loop that calls `backward()` and an optimizer's `step()` (or updates the
weights by hand from `.grad`), here or in the file's own functions it calls, while nothing in that
loop zeroes the gradients (no `zero_grad()`, no `p.grad = None`, no helper that does): never, only
once per epoch outside the batch loop, or, of two optimizers stepped, for one only. A step method
(a GAN's `step(batch)`) that steps two optimizers and zeroes one of them, when nothing in the file
zeroes the other, is read the same way even where the loop calling it is out of sight.

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
import ast

from kb_tools.lint.analysis import BACKWARD, ZEROING_NAMES, dotted, method_call, within

CODE, NAME, ENTRY = "KBL004", "zero-grad-missing", "optimizer-step-order"
MESSAGE = "{who} calls backward() and step() but {what}: they accumulate across steps"


def _engine(backwards, steps) -> bool:
    """`engine.backward(loss)` then `engine.step()` on the same object (DeepSpeed): the engine clears
    the gradients itself."""
    owners = {method_call(b, *BACKWARD) for b in backwards if b.args}
    return bool(owners - {""}) and any(method_call(s, "step") in owners for s in steps)


def _stepped(a, steps) -> set:
    """The optimizers, by name, that the steps move: `opt.step()`, `scaler.step(opt)`."""
    out = set()
    for s in steps:
        receiver = method_call(s, "step")
        if receiver and a.kinds.get(receiver) == "scaler" and s.args:
            receiver = dotted(s.args[0])
        if receiver:
            out.add(receiver)
    return out


def _not_an_optimizer(a, name: str) -> bool:
    """A name that says optim but holds something else: an EMA of the weights (`ema_optimizer =
    WeightEMA(model, ema_model)`), a class of this file that is no torch Optimizer."""
    if "ema" in name.rsplit(".", 1)[-1].lower():
        return True
    built = a.values.get(name)
    if isinstance(built, ast.Call) and isinstance(built.func, ast.Name):
        cls = next((c for c in a.index.of(ast.ClassDef) if c.name == built.func.id), None)
        return cls is not None and not any("Optimizer" in (dotted(b) or "") for b in cls.bases)
    return False


def _unzeroed(a, calls, stepped) -> list:
    """Of two or more optimizers stepped, those nothing zeroes (not themselves, not the model they
    were built on); empty when a zeroing call's target is not known (it may clear them all)."""
    targets = {method_call(c, "zero_grad") for c in calls if method_call(c, "zero_grad") is not None}
    optimizers = {o for o in stepped if a.kinds.get(o) == "optimizer" or (
        "optim" in o.rsplit(".", 1)[-1].lower() and not _not_an_optimizer(a, o))}
    if len(optimizers) < 2 or "" in targets:
        return []

    def holder_of(optimizer: str) -> str | None:
        """The model an optimizer was built on, or the module that holds it (`disc.optimizer` -> disc)."""
        built_on = a.optimizer_owner(optimizer)
        if built_on:
            return built_on
        holder = optimizer.rsplit(".", 1)[0] if "." in optimizer else None
        return holder if holder not in (None, "self") else None

    known = {t for t in targets if t in optimizers or any(holder_of(o) == t for o in optimizers)}
    if known != targets:
        return []

    def zeroed(optimizer: str) -> bool:
        owner = holder_of(optimizer)
        return optimizer in targets or bool(owner) and any(
            owner == t or str(owner).startswith(f"{t}.") for t in targets if t)
    return sorted(o for o in optimizers if not zeroed(o))


def _trains_and_steps(a, loop) -> bool:
    calls = a.run_calls(loop)
    return any(method_call(c, *BACKWARD) is not None for c in calls) and (
        any(a.optimizer_step(c) for c in calls) or a.manual_update(loop))


def _zero_call(c) -> bool:
    name = c.func.attr if isinstance(c.func, ast.Attribute) else c.func.id if isinstance(c.func, ast.Name) else ""
    return "zero_grad" in name or name in ZEROING_NAMES


def _one_optimizer_per_pass(loop, steps) -> bool:
    """Whether every step in the loop is on an optimizer picked by the loop's own variable
    (`opts[k].step()`, `for opt in optimizers: opt.step()`): each pass steps a different optimizer,
    so none of them accumulates across the passes."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or not steps:
        return False
    names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}

    def picked(call):
        receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
        if isinstance(receiver, ast.Subscript):
            receiver = receiver.slice
        return isinstance(receiver, ast.Name) and receiver.id in names
    return all(within(loop, c) and picked(c) for c in steps)


def _branch_unzeroed(a, loop):
    """A backward() in one branch of an `if`/`else` whose steps are never zeroed, when the loop zeroes
    only in the other branch (`if amp: zero_grad(); ... else: backward(); step()`). Returns that backward."""
    for node in a.index.of(ast.If):
        if not node.orelse or not within(loop, node):
            continue
        outside = [c for c in a.run_calls(loop) if not within(node, c)]
        if any(_zero_call(c) for c in outside) or any(within(loop, g) and not within(node, g) for g in a.index.grad_assigns):
            continue
        for zeroing, other in ((node.body, node.orelse), (node.orelse, node.body)):
            if not any(a.zeroes(st) for st in zeroing) or any(a.zeroes(st) for st in other):
                continue
            calls = [c for st in other for c in a.run_calls(st)]
            backwards = [c for c in calls if method_call(c, *BACKWARD) is not None]
            if backwards and any(a.optimizer_step(c) for c in calls):
                return backwards[0]
    return None


def _step_method_unzeroed(a, emit):
    """A function that calls backward() and steps two or more optimizers, zeroing some: one that
    neither it, nor what it calls, nor any other zero_grad() of the file clears accumulates over calls."""
    every_zero = {method_call(c, "zero_grad") for c in a.index.calls if method_call(c, "zero_grad") is not None}
    for fn in a.index.of(ast.FunctionDef):
        calls = a.run_calls(fn)
        backwards = [c for c in calls if method_call(c, *BACKWARD) is not None]
        steps = [c for c in calls if a.optimizer_step(c)]
        if not backwards or len(steps) < 2:
            continue   # most functions: the walk below is the costly part
        branches = [n for n in ast.walk(fn) if isinstance(n, (ast.If, ast.Try, ast.For, ast.While))]
        in_sequence = all(within(fn, c) and not any(within(b, c) for b in branches) for c in steps)
        closures = any(c.args and a.kinds.get(method_call(c, "step") or "") != "scaler" for c in steps)
        if not backwards or len(steps) < 2 or not in_sequence or closures or _engine(backwards, steps) \
                or not a.zeroes(fn):
            continue
        mine = {method_call(c, "zero_grad") for c in calls if method_call(c, "zero_grad") is not None}
        if every_zero - mine:
            continue   # another zero_grad() of the file may clear the rest
        missed = _unzeroed(a, calls, _stepped(a, steps))
        if missed:
            emit(backwards[0], CODE, who=f"{fn.name}()", what=f"{', '.join(missed)} is stepped and never zeroed")
            return


def check(a, emit):
    found = []
    _check_loops(a, lambda *args, **kw: (found.append(1), emit(*args, **kw)))
    if not found:
        _step_method_unzeroed(a, emit)


def _check_loops(a, emit):
    for scope in a.loop_scopes:
        for loop in scope.loops:
            calls = a.run_calls(loop)
            backwards = [c for c in calls if method_call(c, *BACKWARD) is not None]
            steps = [c for c in calls if a.optimizer_step(c)]
            if not backwards or not (steps or a.manual_update(loop)) or _engine(backwards, steps):
                continue
            if any(inner is not loop and within(loop, inner) and _trains_and_steps(a, inner) for inner in scope.loops):
                continue   # an inner loop holds the steps: judged on its own
            if _one_optimizer_per_pass(loop, steps):
                continue   # `for k, d in enumerate(discs): ... opts[k].step()`: each is stepped once per outer pass
            where = next((c for c in a.index.calls_in(loop) if c in backwards or (a.callee(c) is not None and any(
                b in backwards for b in a.run_calls(c)))), backwards[0])
            if not a.zeroes(loop):
                emit(where, CODE, who="the loop", what="nothing in it zeroes the gradients" + (
                    " (they are zeroed outside it, once per pass of an outer loop)" if a.zeroes(scope.scope) else ""))
                continue
            missed = _unzeroed(a, calls, _stepped(a, steps))
            if missed:
                emit(where, CODE, who="the loop", what=f"{', '.join(missed)} is stepped and never zeroed")
                continue
            branch = _branch_unzeroed(a, loop)
            if branch is not None:
                emit(branch, CODE, who="the loop", what="this branch never zeroes the gradients (only the other branch does)")
