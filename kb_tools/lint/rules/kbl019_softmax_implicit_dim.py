"""What it finds: `F.softmax(x)` / `F.log_softmax(x)` called without `dim` in a model's `forward` or
in code that trains, or `nn.Softmax()` / `nn.LogSoftmax()` built without `dim`; and, in an
`nn.Sequential`, an `nn.Softmax(dim=0)` right after an `nn.Linear` (a Linear's classes are its last
axis; dim 0 is the batch); and attention weights `w = scores.softmax(dim=d)` that a later
`torch.einsum` of the same function sums over another axis than `d` (`einsum("bijh,bjhd->bihd", w, v)`
contracts j: the softmax must run over j, not over the query axis i); and a softmax or log_softmax
over dim 0 whose output reaches a cross-entropy, NLL or KL-divergence loss (that loss reads dim 0 as
the samples), directly or as what a model's forward returns; and attention weights softmaxed over a
negative axis other than -1 (`dim=-2`, the query axis) that are then the left operand of `@`,
`torch.matmul` or `torch.bmm` (which sums over their last axis), through dropout or masked_fill on the
way. A softmax that only turns a validation batch's logits into predictions is left alone, and so is
one-sample input made a batch of one.

Why it hurts training: without `dim` torch guesses the axis from the number of dimensions (0 for
a 1-D or 3-D tensor, 1 for 2-D or 4-D) and only warns. On a (batch, time, classes) tensor the guess
is the batch axis: each class is normalised across the samples of the batch instead of each
sample across its classes, so the probabilities depend on the other samples and do not sum to 1.

Example:
    probs = F.softmax(logits)

Use instead:
    probs = F.softmax(logits, dim=-1)
"""

import ast

from kb_tools.lint.analysis import dotted, keyword, literal_dim, unchain, within

CODE, NAME, ENTRY = "KBL019", "softmax-implicit-dim", "softmax-wrong-dim"
MESSAGE = "{what}"
IMPLICIT = ("softmax without dim: torch guesses the axis (the batch axis for a 3-D tensor); pass dim=-1 or the "
            "class axis")
BATCH_AXIS = ("softmax over dim 0 right after a Linear layer: that is the batch axis, the classes are the last one; "
              "pass dim=-1 or the class axis")
LOSS_AXIS = ("{act} over dim 0, the batch axis, of scores that {loss} reads one row per sample: each class is "
             "normalised over the batch instead of each sample over its classes; pass dim=-1 (the class axis)")
EINSUM_AXIS = ("softmax over axis '{normalised}' of weights that einsum('{spec}') then sums over axis '{summed}': "
               "each output is a sum of weights that do not add up to 1; softmax over dim={dim}")
MATMUL_AXIS = ("softmax over dim={dim} of weights that are then multiplied on the left ({op}), which sums over their "
               "last axis: each output is a sum of weights that do not add up to 1; softmax over dim=-1")
SOFTMAXES = {"torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax"}

FUNCTIONS = {"torch.nn.functional.softmax", "torch.nn.functional.log_softmax", "torch.nn.functional.softmin"}
MODULES = {"torch.nn.Softmax", "torch.nn.LogSoftmax", "torch.nn.Softmin"}


def _in_training(a, call) -> bool:
    """A softmax in a model's forward or in code that trains: one that only turns a validation
    batch's logits into predictions is left alone (on the usual 2-D logits torch's guess is right)."""
    fn = a.enclosing(call)
    if fn is None:
        return any(within(loop, call) and a.trains(loop) for scope in a.loop_scopes for loop in scope.loops)
    return fn.name == "forward" or a.trains(fn)


def _softmax_dim(a, value):
    """(the softmax call, its int dim) when `value` is `x.softmax(dim=d)`, `F.softmax(x, dim=d)` or
    `torch.softmax(x, d)` with a literal int d; else None."""
    if not isinstance(value, ast.Call):
        return None
    is_method = isinstance(value.func, ast.Attribute) and value.func.attr == "softmax" \
        and a.imp.canon(value.func) not in FUNCTIONS | {"torch.softmax"}
    if not is_method and a.imp.canon(value.func) not in SOFTMAXES:
        return None
    dim = literal_dim(value, 0 if is_method else 1)
    return (value, dim) if dim is not None else None


def _einsum_axes(a, emit):
    """Softmax weights assigned to a name and then summed by an einsum over another axis."""
    with_einsum = {id(fn): fn for call in a.index.calls if a.imp.canon(call.func) == "torch.einsum"
                   for fn in [a.enclosing(call)] if fn is not None}
    for fn in with_einsum.values():
        weights = {}  # name -> (softmax call, dim), the latest assignment in source order
        for node in sorted((n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.Call))),
                           key=lambda n: (n.lineno, n.col_offset, isinstance(n, ast.Call))):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        found = _softmax_dim(a, node.value)
                        if found:
                            weights[target.id] = found
                        else:
                            weights.pop(target.id, None)
                continue
            if a.imp.canon(node.func) != "torch.einsum" or len(node.args) < 2 \
                    or not isinstance(node.args[0], ast.Constant) or not isinstance(node.args[0].value, str):
                continue
            spec = node.args[0].value.replace(" ", "")
            if "->" not in spec or "." in spec:
                continue
            inputs, output = spec.split("->")
            inputs = inputs.split(",")
            operands = node.args[1:]
            if len(inputs) != len(operands):
                continue
            for k, operand in enumerate(operands):
                if not isinstance(operand, ast.Name) or operand.id not in weights:
                    continue
                call, dim = weights[operand.id]
                letters = inputs[k]
                if not -len(letters) <= dim < len(letters):
                    continue
                others = "".join(inputs[:k] + inputs[k + 1:])
                summed = [c for c in letters if c in others and c not in output]
                normalised = letters[dim]
                if summed and normalised not in summed:
                    emit(call, CODE, what=EINSUM_AXIS.format(normalised=normalised, spec=spec, summed=summed[0],
                                                            dim=letters.index(summed[0])))


SAME_AXES = {"masked_fill", "masked_fill_", "type_as", "to", "float", "half", "contiguous"}
DROPOUTS = {"torch.nn.functional.dropout"}


def _matmul_axes(a, emit):
    """Weights `w = scores.softmax(dim=-2)` later multiplied as `w @ v` (or torch.matmul/bmm(w, v)):
    matmul sums over w's last axis, so a softmax over any other axis from the end leaves weights that
    do not add up to 1 where they are summed. Only negative dims are read: `dim=1` may be the last
    axis of a 2-D tensor. Dropout and masked_fill of the weights keep the axes; any other reassignment
    ends the trace."""
    seen = set()
    softmaxes = [c for c in a.index.calls if (_softmax_dim(a, c) or (None, 0))[1] <= -2]
    for fn in a.index.of(ast.FunctionDef):
        if not any(within(fn, c) for c in softmaxes):
            continue   # no softmax over an axis before the last: nothing to trace
        weights = {}  # name -> (softmax call, dim)
        nodes = [n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.BinOp, ast.Call))]
        for node in sorted(nodes, key=lambda n: (n.lineno, n.col_offset, not isinstance(n, ast.Assign))):
            if isinstance(node, ast.Assign):
                if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
                    continue
                found = _softmax_dim(a, node.value)
                kept = _kept_weights(a, node.value, weights)
                name = node.targets[0].id
                if found and found[1] <= -2:
                    weights[name] = found
                elif kept is not None:
                    weights[name] = kept
                else:
                    weights.pop(name, None)
                continue
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                left, op = node.left, "@"
            elif isinstance(node, ast.Call) and a.imp.canon(node.func) in {"torch.matmul", "torch.bmm"} and node.args:
                left, op = node.args[0], a.imp.canon(node.func)
            else:
                continue
            found = weights.get(left.id) if isinstance(left, ast.Name) else _softmax_dim(a, left)
            if found and found[1] <= -2 and id(found[0]) not in seen:
                seen.add(id(found[0]))
                emit(found[0], CODE, what=MATMUL_AXIS.format(dim=found[1], op=op))


def _kept_weights(a, value, weights):
    """The traced weights `value` keeps when it only drops out or masks them: `self.drop(w)`,
    `F.dropout(w, p)`, `w.masked_fill(mask, -inf)`."""
    if not isinstance(value, ast.Call):
        return None
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr in SAME_AXES and isinstance(func.value, ast.Name):
        return weights.get(func.value.id)
    dropout = a.imp.canon(func) in DROPOUTS or (isinstance(func, ast.Attribute) and "drop" in func.attr.lower())
    if dropout and value.args and isinstance(value.args[0], ast.Name):
        return weights.get(value.args[0].id)
    return None


PER_SAMPLE_LOSSES = ("ce", "nll")
ONE_SAMPLE = ("unsqueeze(0)", "[None", "view(1,", "reshape(1,")


def _into_a_loss(a, emit):
    """A softmax or log_softmax over dim 0 whose output a cross-entropy, NLL or KL-divergence loss
    then reads per sample (directly, through names, or as what a model's forward returns): the loss
    takes dim 0 as the samples, so the softmax normalised each class over the batch. A one-sample
    input made a batch of one on the way (`.unsqueeze(0)`) is left alone."""
    seen = set()
    for call, kind in a.loss_calls:
        built = unchain(a.values.get(dotted(call.func) or ""))   # criterion = nn.NLLLoss(): name the class
        name = a.imp.canon(call.func) or (a.imp.canon(call.func.func) if isinstance(call.func, ast.Call) else "") or (
            a.imp.canon(built.func) if isinstance(built, ast.Call) else "") or ""
        if kind not in PER_SAMPLE_LOSSES and "kl_div" not in name.lower() and "KLDiv" not in name:
            continue
        act = a.activation(call.args[0])
        node = getattr(act, "node", None)
        if act not in ("softmax", "log_softmax") or getattr(act, "dim", None) != 0 or id(node) in seen \
                or any(mark in ast.unparse(call.args[0]).replace(" ", "") for mark in ONE_SAMPLE):
            continue
        seen.add(id(node))
        emit(node, CODE, what=LOSS_AXIS.format(act=act, loss=name.rsplit(".", 1)[-1] or "the loss"))


def check(a, emit):
    _einsum_axes(a, emit)
    _matmul_axes(a, emit)
    _into_a_loss(a, emit)
    for call in a.index.calls:
        name = a.imp.canon(call.func)
        has_dim = any(k.arg == "dim" for k in call.keywords)
        if name in FUNCTIONS and len(call.args) < 2 and not has_dim and call.args and _in_training(a, call):
            emit(call, CODE, what=IMPLICIT)
        elif name in MODULES and not call.args and not has_dim:
            emit(call, CODE, what=IMPLICIT)
        elif a.imp.canon(call.func) == "torch.nn.Sequential":
            for before, layer in zip(call.args, call.args[1:]):   # nn.Linear(h, n), nn.Softmax(dim=0)
                dim = keyword(layer, "dim") if isinstance(layer, ast.Call) else None
                if dim is None and isinstance(layer, ast.Call) and layer.args:
                    dim = layer.args[0]
                if isinstance(layer, ast.Call) and a.imp.canon(layer.func) in MODULES and isinstance(before, ast.Call) \
                        and a.imp.canon(before.func) == "torch.nn.Linear" and isinstance(dim, ast.Constant) and dim.value == 0:
                    emit(layer, CODE, what=BATCH_AXIS)
