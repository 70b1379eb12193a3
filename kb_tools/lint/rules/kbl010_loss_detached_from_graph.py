"""What it finds: a loss computed from a prediction that was visibly cut from the autograd graph:
`.detach()`, `.data`, `.item()`, `.numpy()` or `.tolist()` on the way into the loss; or a loss term
cut that way (or rebuilt with `torch.tensor(...)`) and then added into the loss that `backward()`
is called on, so that term sends no gradient.

Why it hurts training: the loss then has no path back to the parameters; `backward()` either
raises ("element 0 of tensors does not require grad") or, where something else keeps a graph,
reaches no parameter of the model, which never learns.

Example:
    loss = criterion(model(x).detach(), y)

Use instead:
    loss = criterion(model(x), y)   # detach only what you log: loss.item()
"""
import ast

from kb_tools.lint.analysis import BACKWARD, dotted, method_call

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


CUTTERS = {"detach", "item", "numpy", "tolist"}
NEW_TENSORS = {"torch.tensor", "torch.Tensor", "torch.FloatTensor", "torch.as_tensor", "torch.autograd.Variable",
               "torch.autograd.variable.Variable"}


def _loss_like(a, expr, losses) -> bool:
    """Whether an expression reads a loss: a name assigned from a loss call, or named like one."""
    return any(isinstance(n, (ast.Name, ast.Attribute)) and (dotted(n) in losses or "loss" in (dotted(n) or "").lower())
               for n in ast.walk(expr))


REDUCERS = {"torch.mean", "torch.sum", "torch.stack", "torch.cat"}
KEEPERS = {"mean", "sum", "to", "cuda", "float", "double", "squeeze", "view", "reshape"}


def _listed(a, expr) -> bool:
    """A name that holds a Python list (`terms = []`, then appended to): torch.tensor(terms) copies values."""
    return isinstance(expr, ast.Name) and any(isinstance(v, (ast.List, ast.ListComp))
                                              for _, v, _ in a.history.get(expr.id, []))


def _cut_loss(a, expr, losses, depth=0):
    """`how` when `expr` is a loss term cut from the graph: `term.detach()`, `term.item()`, `term.data`,
    or a new tensor made from losses or from a list of them (`torch.tensor(loss)`), also under a
    reduction (`torch.mean(torch.tensor(terms))`); None otherwise."""
    if depth > 4:
        return None
    if isinstance(expr, ast.Call) and ((a.imp.canon(expr.func) or "") in REDUCERS and expr.args):
        return _cut_loss(a, expr.args[0], losses, depth + 1)
    if isinstance(expr, ast.Call) and a.imp.canon(expr.func) is None and isinstance(expr.func, ast.Attribute) \
            and expr.func.attr in KEEPERS:
        return _cut_loss(a, expr.func.value, losses, depth + 1)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in CUTTERS \
            and _loss_like(a, expr.func.value, losses):
        return f"a loss term passed through `.{expr.func.attr}()`"
    if isinstance(expr, ast.Attribute) and expr.attr == "data" and _loss_like(a, expr.value, losses):
        return "a loss term's `.data`"
    if isinstance(expr, ast.Call) and (a.imp.canon(expr.func) or "") in NEW_TENSORS and expr.args \
            and (_loss_like(a, expr.args[0], losses) or _listed(a, expr.args[0])):
        return f"a new tensor built from losses (`{a.imp.canon(expr.func).rsplit('.', 1)[-1]}(...)`)"
    return None


def _backpropagated(a) -> set:
    """The names whose value backward() is called on: `loss.backward()`, `scaler.scale(loss).backward()`,
    `accelerator.backward(loss)`."""
    out = set()
    for c in a.index.calls:
        receiver = method_call(c, *BACKWARD)
        if receiver is None:
            continue
        target = c.args[0] if c.args else c.func.value
        if isinstance(target, ast.Call) and method_call(target, "scale") is not None and target.args:
            target = target.args[0]
        if dotted(target):
            out.add(dotted(target))
    return out


def _terms(expr):
    """The operands of a sum, difference or product, flattened: `a + b * c` -> a, b, c (and the whole)."""
    yield expr
    if isinstance(expr, ast.BinOp):
        yield from _terms(expr.left)
        yield from _terms(expr.right)


def check(a, emit):
    for call, _ in a.loss_calls:
        how = detached(call.args[0])
        if how:
            emit(call, CODE, how=how)
    loss_ids = {id(call) for call, _ in a.loss_calls}
    losses = {name for name, seen in a.history.items()   # names assigned from an expression holding a loss
              if any(id(n) in loss_ids for _, value, _ in seen for n in ast.walk(value))}
    backpropagated = _backpropagated(a)
    cut_names = {}   # name -> the assignment that made it a cut loss term
    for node in sorted(a.index.of(ast.Assign), key=lambda n: n.lineno):
        how = _cut_loss(a, node.value, losses)
        for t in node.targets:
            if dotted(t) and how:
                cut_names[dotted(t)] = (node, how)
    for node in a.index.of(ast.Assign, ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if not any(dotted(t) in backpropagated for t in targets):
            continue
        for term in _terms(node.value):
            how = _cut_loss(a, term, losses)
            if how:
                emit(term, CODE, how=how)
            elif isinstance(term, ast.Name) and term.id in cut_names and cut_names[term.id][0].lineno < node.lineno:
                emit(cut_names[term.id][0], CODE, how=cut_names[term.id][1])
