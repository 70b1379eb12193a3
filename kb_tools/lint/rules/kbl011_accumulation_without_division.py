"""What it finds: an outer training loop that calls `backward()` every iteration but the optimizer's
`step()` only under an `if ... % N == 0` (or a name assigned from one), or an inner loop over
micro-batches (`for micro in range(accum_steps)`) that calls `backward()` with one step after it,
where the loss is never divided (by N, a token count, or a reduction) before its backward. A loop
that also steps on every pass (a critic each iteration, a generator every n_critic) alternates
and is left alone, and so is one that clears the gradients under the step's own condition just
before the stepping pass's backward (nothing is summed then); apex's
`with amp.scale_loss(loss, opt) as scaled:` is followed to its loss.

Also the other way round: a loss divided by an accumulation count (a name with "accum" in it)
in a loop that calls `step()` and clears the gradients unconditionally after every `backward()`,
so nothing accumulates and every update is that many times too small. Loops under accelerate's
`accumulate()`, DeepSpeed or Lightning, which skip the steps themselves, are left alone.

Why it hurts training: accumulated gradients are the sum over the micro-batches, so the update
is N times larger than the batch the learning rate was tuned for: the effective learning rate
is multiplied by the accumulation count.

Example:
    loss.backward()
    if (i + 1) % accum == 0:
        opt.step(); opt.zero_grad()

Use instead:
    (loss / accum).backward()
    if (i + 1) % accum == 0:
        opt.step(); opt.zero_grad()
"""
import ast

from kb_tools.lint.analysis import BACKWARD, dotted, keyword, method_call, within

CODE, NAME, ENTRY = "KBL011", "accumulation-without-division", "grad-accumulation-scaling"
MESSAGE = "{what}"
NOT_DIVIDED = ("gradients are accumulated over several backward() calls per step() but the loss is not divided by "
               "the number of micro-batches: the effective learning rate is multiplied by it")


def divided(a, expr) -> bool:
    """Whether `expr` (the loss given to backward) is visibly divided, here or where it was assigned."""
    if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) for n in ast.walk(expr)):
        return True
    name = dotted(expr)
    if name is None:
        return True  # not a plain name: cannot tell, stay silent
    for node in a.index.of(ast.AugAssign, ast.Assign):
        if isinstance(node, ast.AugAssign) and dotted(node.target) == name and isinstance(node.op, ast.Div):
            return True
        if isinstance(node, ast.Assign) and any(dotted(t) == name for t in node.targets) and any(
                isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) for n in ast.walk(node.value)):
            return True
        if isinstance(node, ast.Assign) and any(dotted(t) == name for t in node.targets) and any(
                keyword(n, "reduction") is not None for n in ast.walk(node.value) if isinstance(n, ast.Call)):
            return True
    return False


def _cleared_before_last_backward(a, loop, found) -> bool:
    """Whether a zero_grad() under the step's own condition runs before the backward() of the pass
    that steps (`if cond: zero_grad()`, `backward()`, `if cond: step()`): only that pass's gradient
    reaches the step, so nothing is summed."""
    steps, outside = found
    tests = {ast.dump(n.test) for n in steps}
    first_backward = next((c for c in outside if method_call(c, *BACKWARD) is not None), None)
    return first_backward is not None and any(
        isinstance(n, ast.If) and within(loop, n) and ast.dump(n.test) in tests and n.lineno < first_backward.lineno
        and any(method_call(c, "zero_grad") is not None for c in a.index.calls_in(n)) for n in a.index.of(ast.If))


def _accumulates(a, loop) -> bool:
    """The loop accumulates gradients (Analysis.accumulation) with no gradient rescaling (a division)
    in the step block before the step."""
    found = a.accumulation(loop)
    return found is not None and not _cleared_before_last_backward(a, loop, found) and not any(
        isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) for node in found[0] for st in node.body for n in ast.walk(st))


MICRO_WORDS = ("accum", "micro")


def _micro_loop(a, loop):
    """An inner loop over micro-batches (its range or variable says accum or micro) that calls
    backward() but steps nothing, inside an outer loop that steps after it: the other form of
    accumulation. Returns the inner loop, or None."""
    for inner in (n for n in a.index.of(ast.For) if n is not loop and within(loop, n)):
        words = ast.unparse(inner.iter).lower() + " " + ast.unparse(inner.target).lower()
        if not any(w in words for w in MICRO_WORDS):
            continue
        calls = a.run_calls(inner)
        if not any(method_call(c, *BACKWARD) is not None for c in calls) or any(a.optimizer_step(c) for c in calls):
            continue
        after = [c for c in a.index.calls_in(loop) if c.lineno > inner.end_lineno]
        rescaled = any(method_call(c, "div_", "mul_") is not None for c in after) or any(
            isinstance(n, ast.AugAssign) and isinstance(n.op, (ast.Div, ast.Mult)) and within(loop, n)
            and n.lineno > inner.end_lineno for n in a.index.of(ast.AugAssign))
        if any(a.optimizer_step(c) for c in after) and not rescaled:
            return inner
    return None


NEVER_ACCUMULATED = ("the loss is divided by the accumulation count {count}, but step() and zero_grad() run after "
                     "every backward(): nothing accumulates, so every update is {count} times too small")
SKIP_STEPS_ITSELF = ("accumulate(", "deepspeed", "lightning", "accelerator", "Accelerator")


def _accumulation_count(a, fn, loss: str):
    """The name a loss is divided by when it is an accumulation count: `loss /= grad_accum_steps`,
    `loss = loss / args.gradient_accumulation_steps`."""
    for node in ast.walk(fn):
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Div) and dotted(node.target) == loss:
            count = dotted(node.value)
        elif isinstance(node, ast.Assign) and any(dotted(t) == loss for t in node.targets) \
                and isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Div):
            count = dotted(node.value.right)
        else:
            continue
        if count and "accum" in count.lower():
            return count
    return None


def _divided_but_never_accumulated(a, emit):
    """A backward() whose innermost loop also steps and zeroes on every pass (no `if` around either)
    while its loss was divided by an accumulation count."""
    if any(word in a.text for word in SKIP_STEPS_ITSELF):
        return
    loops = a.index.of(ast.For, ast.While)
    for c in a.index.calls:
        if method_call(c, *BACKWARD) is None:
            continue
        holders = [loop for loop in loops if within(loop, c)]
        inner = next((loop for loop in holders if not any(o is not loop and within(loop, o) for o in holders)), None)
        fn = a.enclosing(c)
        loss = dotted(a.backpropagated(c))
        count = _accumulation_count(a, fn, loss) if inner is not None and fn is not None and loss else None
        if count is None:
            continue
        conditional = [n for n in ast.walk(inner) if isinstance(n, ast.If)]
        unconditional = [x for x in a.index.calls_in(inner) if not any(within(n, x) for n in conditional)]
        if any(a.optimizer_step(x) for x in unconditional) and any(a.zeroes(x) for x in unconditional) \
                and not a.periodic_steps(inner):
            emit(c, CODE, what=NEVER_ACCUMULATED.format(count=count))


def check(a, emit):
    _divided_but_never_accumulated(a, emit)
    for scope in a.loop_scopes:
        for loop in scope.outer:
            if not a.index.trains(loop):
                continue
            micro = None if _accumulates(a, loop) else _micro_loop(a, loop)
            if not _accumulates(a, loop) and micro is None:
                continue
            for c in a.index.calls_in(micro or loop):
                if method_call(c, *BACKWARD) is None:
                    continue
                if not divided(a, a.backpropagated(c)):
                    emit(c, CODE, what=NOT_DIVIDED)
                break
