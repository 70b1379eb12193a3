"""What it finds: a loss computed from a prediction that was visibly cut from the autograd graph:
`.detach()`, `.data`, `.item()`, `.numpy()` or `.tolist()` on the way into the loss; or a loss term
cut that way (or rebuilt with `torch.tensor(...)`), or computed only from values the same function
made under `torch.no_grad()`, and then added into the loss that `backward()` is called on (or
that a function returns for its caller to backpropagate, such as `compute_loss`), so that term
sends no gradient; or a loss whose requires_grad is set by hand
(`loss.requires_grad = True`, which torch refuses on a tensor with a graph) or that is a new leaf
(`torch.tensor(value, requires_grad=True)`): the graph was cut before it.

Why it hurts training: the loss then has no path back to the parameters; `backward()` either
raises ("element 0 of tensors does not require grad") or, where something else keeps a graph,
reaches no parameter of the model, which never learns.

Example:
    loss = criterion(model(x).detach(), y)

Use instead:
    loss = criterion(model(x), y)   # detach only what you log: loss.item()
"""
import ast

from kb_tools.lint.analysis import BACKWARD, SAME_VALUES, dotted, method_call, within

CODE, NAME, ENTRY = "KBL010", "loss-detached-from-graph", "loss-detached-from-graph"
MESSAGE = "the loss is computed from {how}: it is cut from the graph, so backward() reaches no parameter"


def detached(a, expr, depth: int = 0) -> str | None:
    """How a loss input was cut from the graph, if visibly: `.detach()`, `.data`, `.item()`, `.numpy()`
    on the way into the loss. A model called on a detached input (`D(fake.detach())`, a GAN's
    discriminator step) still has a graph through its own parameters: its arguments are not read."""
    if depth > 12 or expr is None:
        return None
    if isinstance(expr, ast.Call):
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in CUTTERS:
            return f"`.{expr.func.attr}()`"
        canon = a.imp.canon(expr.func) or ""
        parts = list(expr.args) + [k.value for k in expr.keywords]
        if canon.startswith("torch."):   # torch.sigmoid(x.data), F.softmax(...)
            return next((how for p in parts for how in [detached(a, p, depth + 1)] if how), None)
        if not canon and isinstance(expr.func, ast.Attribute) and expr.func.attr in SAME_VALUES | TENSOR_MATH:
            parts.insert(0, expr.func.value)   # x.view(-1), x.mean(): the tensor it is called on
            return next((how for p in parts for how in [detached(a, p, depth + 1)] if how), None)
        return None   # a model or a function of the user's: its output has a graph of its own
    if isinstance(expr, ast.Attribute):
        return "`.data`" if expr.attr == "data" else None
    children = {ast.BinOp: lambda e: [e.left, e.right], ast.UnaryOp: lambda e: [e.operand],
                ast.Subscript: lambda e: [e.value], ast.Starred: lambda e: [e.value],
                ast.Tuple: lambda e: e.elts, ast.List: lambda e: e.elts}.get(type(expr))
    if children is None:
        return None
    return next((how for p in children(expr) for how in [detached(a, p, depth + 1)] if how), None)


CUTTERS = {"detach", "item", "numpy", "tolist"}
TENSOR_MATH = {"sum", "mean", "exp", "log", "abs", "pow", "sqrt", "clamp", "sigmoid", "softmax", "log_softmax", "tanh"}
NEW_TENSORS = {"torch.tensor", "torch.Tensor", "torch.FloatTensor", "torch.as_tensor", "torch.autograd.Variable",
               "torch.autograd.variable.Variable"}


def _loss_like(a, expr, losses) -> bool:
    """Whether an expression reads a loss: a name assigned from a loss call, or named like one."""
    return any(isinstance(n, (ast.Name, ast.Attribute)) and (dotted(n) in losses or "loss" in (dotted(n) or "").lower())
               for n in ast.walk(expr))


REDUCERS = {"torch.mean", "torch.sum", "torch.stack", "torch.cat"}
KEEPERS = {"mean", "sum", "to", "cuda", "float", "double", "squeeze", "view", "reshape"}


def _listed(a, expr, losses) -> bool:
    """A name that holds a Python list of losses (`terms = []` then `terms.append(loss)`, or a list or
    comprehension of loss-like items, or of values computed by torch operations, such as per-layer
    penalties `torch.mean(torch.abs(...))`): torch.tensor(terms) copies their values. A list of class
    weights or constants is not one."""
    if not isinstance(expr, ast.Name):
        return False
    seen = [v for _, v, _ in a.history.get(expr.id, [])]
    if not any(isinstance(v, (ast.List, ast.ListComp)) for v in seen):
        return False
    items = [e for v in seen if isinstance(v, ast.List) for e in v.elts] + \
        [v.elt for v in seen if isinstance(v, ast.ListComp)] + \
        [c.args[0] for c in a.index.calls if isinstance(c.func, ast.Attribute) and c.func.attr == "append"
         and dotted(c.func.value) == expr.id and c.args]
    return any(_loss_like(a, item, losses) or _computed_tensor(a, item) for item in items)


FACTORIES = {"torch.zeros", "torch.ones", "torch.full", "torch.empty", "torch.arange", "torch.linspace", "torch.eye",
             "torch.rand", "torch.randn", "torch.randint", "torch.zeros_like", "torch.ones_like", "torch.full_like"}


def _computed_tensor(a, expr) -> bool:
    """A value computed by a torch operation on other tensors (`torch.mean(torch.abs(cos))`, `F.mse_loss(...)`):
    a term with a graph when its inputs have one. New tensors of constants are not."""
    name = a.imp.canon(expr.func) or "" if isinstance(expr, ast.Call) else ""
    return name.startswith("torch.") and name not in FACTORIES and name not in NEW_TENSORS


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
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Div)):   # (cut * weight).float()
        return _cut_loss(a, expr.left, losses, depth + 1) or _cut_loss(a, expr.right, losses, depth + 1)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in CUTTERS \
            and _loss_like(a, expr.func.value, losses):
        return f"a loss term passed through `.{expr.func.attr}()`"
    if isinstance(expr, ast.Attribute) and expr.attr == "data" and _loss_like(a, expr.value, losses):
        return "a loss term's `.data`"
    if isinstance(expr, ast.Call) and (a.imp.canon(expr.func) or "") in NEW_TENSORS and expr.args \
            and (_loss_like(a, expr.args[0], losses) or _listed(a, expr.args[0], losses)):
        return f"a new tensor built from losses (`{a.imp.canon(expr.func).rsplit('.', 1)[-1]}(...)`)"
    return None


def _backpropagated(a) -> dict:
    """The names whose value backward() is called on (Analysis.backpropagated), with those calls."""
    out: dict = {}
    for c in a.index.calls:
        target = dotted(a.backpropagated(c)) if method_call(c, *BACKWARD) is not None else None
        if target:
            out.setdefault(target, []).append(c)
    return out


def _terms(expr):
    """The operands of a sum, difference or product, flattened: `a + b * c` -> a, b, c (and the whole)."""
    yield expr
    if isinstance(expr, ast.BinOp):
        yield from _terms(expr.left)
        yield from _terms(expr.right)


def _trained_on(a, call) -> bool:
    """Whether a loss is one the code trains on: computed in a function or loop that calls backward()
    (a validation loss on detached predictions, kept for the log, is not)."""
    fn = a.enclosing(call)
    if fn is not None:
        return a.trains(fn)
    return any(within(loop, call) and a.trains(loop) for scope in a.loop_scopes for loop in scope.loops) \
        or not any(a.trains(loop) for scope in a.loop_scopes for loop in scope.loops)


def check(a, emit):
    emitted = set()

    def emit_once(node, code, **kw):   # one finding a line: two paths may reach the same cut term
        if node.lineno not in emitted:
            emitted.add(node.lineno)
            emit(node, code, **kw)
    _check(a, emit_once)


def _check(a, emit):
    for call, _ in a.loss_calls:
        how = detached(a, call.args[0])
        if how and _trained_on(a, call):
            emit(call, CODE, how=how)
    starts = sorted((call.lineno, call.col_offset) for call, _ in a.loss_calls)
    losses = {name for name, seen in a.history.items()   # names assigned from an expression holding a loss
              if any(hasattr(value, "end_lineno") and a.holds_any(value, starts) for _, value, _ in seen)}
    backpropagated = _backpropagated(a)
    cut_names = {}   # name -> the assignment that made it a cut loss term
    for node in sorted(a.index.of(ast.Assign), key=lambda n: n.lineno):
        how = _cut_loss(a, node.value, losses)
        for t in node.targets:
            if dotted(t) and how:
                cut_names[dotted(t)] = (node, how)
    for node in a.index.of(ast.Assign, ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = {dotted(t) for t in targets} & set(backpropagated)
        if not names or not any(b.lineno > node.lineno or a.enclosing(b) is not a.enclosing(node)
                                for name in names for b in backpropagated[name]):
            continue   # assigned after every backward() of it in its function: a log (loss.detach() * n)
        for term in _terms(node.value):
            how = _cut_loss(a, term, losses)
            if how:
                emit(term, CODE, how=how)
            elif isinstance(term, ast.Name) and term.id in cut_names and cut_names[term.id][0].lineno < node.lineno:
                emit(cut_names[term.id][0], CODE, how=cut_names[term.id][1])
    _forced_leaf(a, emit, backpropagated)
    _loss_of_no_grad_values(a, emit, backpropagated)
    _returned_loss_rebuilt(a, emit, losses)


def _returned_parts(expr):
    """What a return hands back: `(loss, out) if flag else loss` -> loss, out, loss."""
    if isinstance(expr, ast.IfExp):
        return _returned_parts(expr.body) + _returned_parts(expr.orelse)
    return list(expr.elts) if isinstance(expr, ast.Tuple) else [expr]


def _returned_loss_rebuilt(a, emit, losses):
    """A loss the function returns for its caller to backpropagate (`return lm_loss, stats` from a
    forward step, `return loss` from compute_loss) that had a term rebuilt with `torch.tensor(...)` from
    losses added in: the term is a constant. Only names with "loss" in them that the function got
    from a call (not an accumulator started at 0) are read, and only terms rebuilt as new tensors
    (`.item()` on the way into a logged total is the common, harmless case)."""
    for fn in a.index.of(ast.FunctionDef):
        if any(word in fn.name.lower() for word in ("eval", "valid", "test", "log")):
            continue
        returned = {dotted(e) for r in a.returns(fn) if r.value is not None for e in _returned_parts(r.value)} - {None}
        returned = {n for n in returned if "loss" in n.lower() and not any(
            isinstance(v, ast.Constant) for _, v, holder in a.history.get(n, []) if holder is fn)}
        if not returned:
            continue   # most functions return no loss: skip the walk
        for node in ast.walk(fn):
            if not isinstance(node, (ast.Assign, ast.AugAssign)) or a.enclosing(node) is not fn:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if not {dotted(t) for t in targets} & returned:
                continue
            added = isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Add, ast.Sub)) or \
                isinstance(node.value, ast.BinOp) and isinstance(node.value.op, (ast.Add, ast.Sub))
            if not added:
                continue   # the whole loss replaced by a constant (a step with nothing to learn) is deliberate
            for term in _terms(node.value):
                found = term
                if isinstance(term, ast.Name):   # bal = torch.tensor(per_layer).mean() * w; loss += bal
                    earlier = [v for end, v, holder in a.history.get(term.id, []) if holder is fn and end < (node.lineno, 0)]
                    found = earlier[-1] if earlier else term
                how = _cut_loss(a, found, losses)
                if how and how.startswith("a new tensor"):
                    emit(found, CODE, how=how)


REORDER = {"flip", "roll", "t", "chunk", "split", "norm", "float", "detach"}   # tensor methods that keep "no graph"


def _only_no_grad(a, expr, blocks, depth=0) -> str | None:
    """"nograd" when every tensor `expr` reads was made inside a `torch.no_grad()` block of its function
    (through torch functions, tensor methods, indexing and local names); "graph" when some part may
    carry a graph (a model or a function of the user's, a parameter, a name made elsewhere); None for
    constants only."""
    if depth > 8:
        return "graph"
    if isinstance(expr, ast.Constant):
        return None
    if isinstance(expr, ast.Call):
        canon = a.imp.canon(expr.func) or ""
        if canon.startswith("torch."):
            parts = list(expr.args) + [k.value for k in expr.keywords]
        elif not canon and isinstance(expr.func, ast.Attribute) and expr.func.attr in SAME_VALUES | TENSOR_MATH | REORDER:
            parts = [expr.func.value] + list(expr.args)
        else:
            return "graph"
    elif isinstance(expr, ast.Subscript):
        parts = [expr.value]
    elif isinstance(expr, (ast.List, ast.Tuple)):
        parts = list(expr.elts)
    elif isinstance(expr, ast.BinOp):
        parts = [expr.left, expr.right]
    elif isinstance(expr, ast.Name):
        fn = a.enclosing(expr)
        here = (expr.lineno, expr.col_offset)
        seen = [(end, v) for end, v, holder in a.history.get(expr.id, []) if holder is fn and end <= here]
        if not seen or fn is None:
            return "graph"
        value = seen[-1][1]
        if any(within(b, value) for b in blocks) and not any(within(b, expr) for b in blocks):
            return "nograd"
        parts = [value]
    else:
        return "graph"
    found = [_only_no_grad(a, p, blocks, depth + 1) for p in parts]
    return "graph" if "graph" in found else "nograd" if "nograd" in found else None


def _loss_of_no_grad_values(a, emit, backpropagated):
    """A loss term whose every input the function computed under `torch.no_grad()` (embeddings of
    views taken for pseudo-labels, then fed to a contrastive loss), added into the loss backward()
    is called on: that term is a constant."""
    blocks = a.no_grad_blocks
    if not blocks:
        return
    for node in a.index.of(ast.Assign, ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if not {dotted(t) for t in targets} & set(backpropagated):
            continue
        fn = a.enclosing(node)
        for term in _terms(node.value):
            if not isinstance(term, ast.Name):
                continue
            for _, value, holder in a.history.get(term.id, []):
                if holder is not fn or not isinstance(value, ast.Call) or not value.args \
                        or any(within(b, value) for b in blocks):
                    continue
                callee = (dotted(value.func) or "").lower()
                if ("loss" in callee or "criterion" in callee) and _only_no_grad(a, value.args[0], blocks) == "nograd":
                    emit(value, CODE, how="values made under `torch.no_grad()` only")


def _forced_leaf(a, emit, backpropagated):
    """A tensor backward() is called on whose requires_grad is set by hand (`loss.requires_grad = True`,
    which torch refuses on a tensor with a graph) or that is built as a new leaf (`torch.tensor(value,
    requires_grad=True)`): the loss was already cut from the graph, and backward() now runs without
    an error and reaches no parameter. (`loss.requires_grad_()` is left alone: on a loss with a graph
    it is a no-op.)"""
    for node in a.index.of(ast.Assign):
        for t in node.targets:
            if isinstance(t, ast.Attribute) and t.attr == "requires_grad" and dotted(t.value) in backpropagated \
                    and isinstance(node.value, ast.Constant) and node.value.value is True:
                emit(node, CODE, how=f"a tensor made a leaf by hand (`{dotted(t.value)}.requires_grad = True`)")
        value = node.value
        if isinstance(value, ast.Call) and (a.imp.canon(value.func) or "") in NEW_TENSORS and any(
                k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in value.keywords) and any(dotted(t) in backpropagated for t in node.targets):
            emit(node, CODE, how=f"a new leaf tensor (`{a.imp.canon(value.func).rsplit('.', 1)[-1]}(..., "
                                 "requires_grad=True)`)")
