"""What it finds: `clip_grad_norm_` / `clip_grad_value_` after a `scaler.scale(loss).backward()` in
the same block (an `if args.clip > 0:` around the clip included, and the calls of a function of
the file the block calls, such as `if self.check_gradients(loss):`), with no
`scaler.unscale_(optimizer)` between them.

Why it hurts training: under a GradScaler the gradients are still multiplied by the loss scale
(65,536 at the start), so the clipping threshold is compared with gradients thousands of times
too large: every step is clipped to a tiny update and training crawls.

Example:
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)

Use instead:
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
"""
import ast

from kb_tools.lint.analysis import BACKWARD, method_call

CODE, NAME, ENTRY = "KBL012", "clip-before-unscale", "clip-before-unscale"
MESSAGE = ("gradients are clipped while still multiplied by the GradScaler's scale: call scaler.unscale_(optimizer) "
           "before clipping")
HOLDERS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith,
           ast.Try)


def straight_calls(a, block) -> list:
    """The calls a block runs in order, entering `with` blocks but not branches, loops or
    nested definitions (each of those is a block of its own)."""
    out = []
    for stmt in block:
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            out.extend(c for item in stmt.items for c in a.index.calls_in(item.context_expr))
            out.extend(straight_calls(a, stmt.body))
        elif isinstance(stmt, ast.If) and not stmt.orelse:   # `if args.clip > 0:` around the clip
            out.extend(a.index.calls_in(stmt.test))
            out.extend(straight_calls(a, stmt.body))
        elif not isinstance(stmt, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.FunctionDef,
                                   ast.AsyncFunctionDef, ast.ClassDef)):
            out.extend(a.index.calls_in(stmt))
    return out


def check(a, emit):
    holders = [a.tree] + a.index.of(*HOLDERS)
    for block in (getattr(n, f) for n in holders for f in ("body", "orelse") if isinstance(getattr(n, f, None), list)):
        scaled = False
        calls = []
        for c in straight_calls(a, block):   # a guard method the block calls (`if self.check_gradients(loss):`)
            fn = a.callee(c)
            calls += [c] + (a.owner_of(fn).run_calls(fn) if fn is not None else [])
        for c in calls:
            if method_call(c, *BACKWARD) is not None and isinstance(c.func.value, ast.Call) \
                    and method_call(c.func.value, "scale") is not None:
                scaled = True
            elif method_call(c, "unscale_") is not None or method_call(c, *BACKWARD) is not None \
                    or (method_call(c, "step") is not None and c.args):
                scaled = False   # unscaled, or a backward() without the scaler, or scaler.step(opt) done
            elif scaled:
                name = a.imp.canon(c.func) or (c.func.attr if isinstance(c.func, ast.Attribute) else
                                               c.func.id if isinstance(c.func, ast.Name) else "")
                if name.split(".")[-1] in ("clip_grad_norm_", "clip_grad_value_"):
                    emit(c, CODE)
