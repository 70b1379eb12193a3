"""What it finds: `zero_grad()` called after `backward()` and before the optimizer's `step()` in the
same block of a loop; or, in a loop that accumulates gradients (the step under `if (i + 1) % N == 0`),
a `zero_grad()` that runs on every micro-batch, wiping the gradients the earlier ones left; or,
inside accelerate's `with accelerator.accumulate(model):`, a `zero_grad()` on the model (or anything
but an optimizer), which accelerate does not hold back until the accumulation boundary.

Why it hurts training: the step then sees all-zero gradients, so the weights never move (or move
only by weight decay): the loss stays flat whatever the learning rate.

Example:
    loss.backward()
    opt.zero_grad()
    opt.step()

Use instead:
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
import ast

from kb_tools.lint.analysis import BACKWARD, method_call, unchain, within

CODE, NAME, ENTRY = "KBL005", "zero-grad-between-backward-and-step", "optimizer-step-order"
MESSAGE = "{what}"
BETWEEN = "zero_grad() between backward() and step() wipes the gradients: step() then moves nothing"
UNDER_ACCUMULATE = ("{model}.zero_grad() inside accelerator.accumulate() runs on every micro-batch (only the "
                    "prepared optimizer's zero_grad() waits for the boundary): it wipes what the earlier "
                    "micro-batches accumulated; call optimizer.zero_grad()")


def _model_zeroed_under_accumulate(a, emit):
    """`with accelerator.accumulate(model):` around a `model.zero_grad()` (or any zero_grad() whose
    receiver is not an optimizer): accelerate skips the prepared optimizer's step() and zero_grad()
    between boundaries, but not the model's, so each micro-batch clears the ones before it."""
    for block in a.index.of(ast.With, ast.AsyncWith):
        if not any(isinstance(item.context_expr, ast.Call) and method_call(item.context_expr, "accumulate")
                   for item in block.items):
            continue
        for c in (c for stmt in block.body for c in a.index.calls_in(stmt)):
            receiver = method_call(c, "zero_grad")
            if receiver and a.kinds.get(receiver) != "optimizer" and "optim" not in receiver.lower():
                emit(c, CODE, what=UNDER_ACCUMULATE.format(model=receiver))


BLOCK_HOLDERS = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try)


def loop_blocks(a, loop) -> list:
    """The loop's body and every block nested in it (branches, inner loops, with and try bodies)."""
    holders = a.index.of(*BLOCK_HOLDERS)
    return [loop.body] + [getattr(n, f) for n in holders if n is not loop and within(loop, n)
                          for f in ("body", "orelse") if isinstance(getattr(n, f, None), list)]


def _part_of_a_model(a, receiver: str) -> bool:
    """`net.encoder.zero_grad()`: a submodule of a known model, cleared on purpose to freeze that part
    for this step (the rest of the gradients still reach step())."""
    if "." not in receiver or receiver.startswith("self.") and receiver.count(".") == 1:
        return False
    owner = receiver.rsplit(".", 1)[0]
    owners = {a.optimizer_owner(n) for n, kind in a.kinds.items() if kind == "optimizer"}
    return owner in a.model_output or owner in owners or isinstance(unchain(a.values.get(owner)), ast.Call)


def check(a, emit):
    _model_zeroed_under_accumulate(a, emit)
    for scope in a.loop_scopes:
        for loop in scope.loops:
            for block in loop_blocks(a, loop):
                seq = [c for stmt in block for c in a.index.calls_in(stmt)]
                last_backward = None
                for c in seq:
                    if method_call(c, *BACKWARD) is not None:
                        last_backward = c
                    elif method_call(c, "zero_grad") is not None and last_backward is not None \
                            and not _part_of_a_model(a, method_call(c, "zero_grad")):
                        after = seq[seq.index(c) + 1:]   # the next backward or step decides
                        nxt = next((s for s in after if a.optimizer_step(s) or method_call(s, *BACKWARD) is not None), None)
                        if nxt is not None and a.optimizer_step(nxt):
                            emit(c, CODE, what=BETWEEN)
                        last_backward = None
                    elif a.optimizer_step(c):
                        last_backward = None
            found = a.accumulation(loop)
            inner = [n for n in scope.loops if n is not loop and within(loop, n) and a.index.trains(n)]
            if found is not None and not inner:   # accumulation: a zero_grad on every micro-batch wipes the earlier ones
                branches = [n for n in a.index.of(ast.If, ast.FunctionDef) if within(loop, n) and n is not loop]
                skips = [n for n in branches if isinstance(n, ast.If) and any(
                    isinstance(x, (ast.Continue, ast.Break, ast.Return)) for x in ast.walk(n))]
                for c in found[1]:
                    if method_call(c, "zero_grad") is not None and not any(within(n, c) for n in branches) \
                            and not any(n.lineno < c.lineno for n in skips):   # `if not boundary: continue` first
                        emit(c, CODE, what=BETWEEN)
                        break
