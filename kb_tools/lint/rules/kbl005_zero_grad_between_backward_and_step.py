"""What it finds: `zero_grad()` called after `backward()` and before the optimizer's `step()` in the
same block of a loop.

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

from kb_tools.lint.analysis import method_call, within

CODE, NAME, ENTRY = "KBL005", "zero-grad-between-backward-and-step", "optimizer-step-order"
MESSAGE = "zero_grad() between backward() and step() wipes the gradients: step() then moves nothing"


BLOCK_HOLDERS = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try)


def loop_blocks(a, loop) -> list:
    """The loop's body and every block nested in it (branches, inner loops, with and try bodies)."""
    holders = a.index.of(*BLOCK_HOLDERS)
    return [loop.body] + [getattr(n, f) for n in holders if n is not loop and within(loop, n)
                          for f in ("body", "orelse") if isinstance(getattr(n, f, None), list)]


def check(a, emit):
    for scope in a.loop_scopes:
        for loop in scope.loops:
            for block in loop_blocks(a, loop):
                seq = [c for stmt in block for c in a.index.calls_in(stmt)]
                last_backward = None
                for c in seq:
                    if method_call(c, "backward") is not None:
                        last_backward = c
                    elif method_call(c, "zero_grad") is not None and last_backward is not None:
                        if any(a.optimizer_step(s) and (s.lineno, s.col_offset) > (c.lineno, c.col_offset)
                               for s in seq):
                            emit(c, CODE)
                        last_backward = None
                    elif a.optimizer_step(c):
                        last_backward = None
