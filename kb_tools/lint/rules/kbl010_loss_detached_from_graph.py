"""What it finds: a loss computed from a prediction that was visibly cut from the autograd graph:
`.detach()`, `.data`, `.item()`, `.numpy()` or `.tolist()` on the way into the loss.

Why it hurts training: the loss then has no path back to the parameters; `backward()` either
raises ("element 0 of tensors does not require grad") or, where something else keeps a graph,
reaches no parameter of the model, which never learns.

Example:
    loss = criterion(model(x).detach(), y)

Use instead:
    loss = criterion(model(x), y)   # detach only what you log: loss.item()
"""
import ast

CODE, NAME, ENTRY = "KBL010", "loss-detached-from-graph", "loss-detached-from-graph"
MESSAGE = "the loss is computed from {how}: it is cut from the graph, so backward() reaches no parameter"


def detached(expr) -> str | None:
    """How a loss input was cut from the graph, if visibly: `.detach()`, `.data`, `.item()`, `.numpy()`."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "detach", "item", "numpy", "tolist"):
            return f"`.{node.func.attr}()`"
        if isinstance(node, ast.Attribute) and node.attr == "data":
            return "`.data`"
    return None


def check(a, emit):
    for call, _ in a.loss_calls:
        how = detached(call.args[0])
        if how:
            emit(call, CODE, how=how)
