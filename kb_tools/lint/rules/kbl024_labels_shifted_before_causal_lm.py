"""What it finds: a Hugging Face causal language model (`AutoModelForCausalLM`, `...ForCausalLM`,
`...LMHeadModel`, loaded with `from_pretrained` or built from a config) called with
`input_ids=ids[:, :-1]` and `labels=ids[:, 1:]`: inputs and labels already shifted against each
other by hand, directly or through names assigned in the same function; or, in a file that builds
such a model, a batch dict (a dataset's `__getitem__`, a collator) that pairs them that way.

Why it hurts training: these models shift the labels themselves (the logits at position t are scored
against `labels[t + 1]`, which is why `labels=input_ids` is the documented call). Shifted once more
by hand, position t is trained to predict the token two ahead. Nothing errors, since the shapes still
match; the loss settles at the floor of that harder task and next-token prediction is never trained.

Example:
    out = model(input_ids=ids[:, :-1], labels=ids[:, 1:])

Use instead:
    out = model(input_ids=ids, labels=ids)      # the model shifts inside
"""
import ast

from kb_tools.lint.analysis import dotted, keyword, unchain

CODE, NAME, ENTRY = "KBL024", "labels-shifted-before-causal-lm", "labels-shifted-twice"
MESSAGE = ("labels={labels} and input_ids={inputs} are shifted by hand, and {model} shifts labels again "
           "inside: each position is trained on the token two ahead; pass the same unshifted ids as both")
CAUSAL = ("ForCausalLM", "LMHeadModel")


def _causal_lm(a, call) -> bool:
    """A transformers causal-LM class, its from_pretrained/from_config, under .to()/.cuda() chains."""
    call = unchain(call)
    if not isinstance(call, ast.Call):
        return False
    canon = a.imp.canon(call.func) or ""
    if not canon.startswith("transformers."):
        return False
    parts = canon.split(".")
    cls = parts[-2] if parts[-1] in ("from_pretrained", "from_config") else parts[-1]
    return cls.endswith(CAUSAL)


def _slice_of(a, expr, holder, depth: int = 0):
    """(base name, "next" | "cut") when `expr` is `base[..., 1:]` (the next tokens) or `base[..., :-1]`
    (all but the last), under .contiguous()/.clone()/.to(); followed through names its function assigned."""
    expr = unchain(expr, {"contiguous", "clone", "to", "cuda", "long"})
    if isinstance(expr, ast.Name) and depth < 2:
        values = [v for _, v, fn in a.history.get(expr.id, []) if fn is holder]
        return _slice_of(a, values[-1], holder, depth + 1) if values else None
    if not isinstance(expr, ast.Subscript) or dotted(expr.value) is None:
        return None
    last = expr.slice.elts[-1] if isinstance(expr.slice, ast.Tuple) and expr.slice.elts else expr.slice
    if not isinstance(last, ast.Slice) or last.step is not None:
        return None
    if last.upper is None and isinstance(last.lower, ast.Constant) and last.lower.value == 1:
        return dotted(expr.value), "next"
    if last.lower is None and isinstance(last.upper, ast.UnaryOp) and isinstance(last.upper.op, ast.USub) \
            and isinstance(last.upper.operand, ast.Constant) and last.upper.operand.value == 1:
        return dotted(expr.value), "cut"
    return None


def check(a, emit):
    models = {name for name, entries in a.history.items() if any(_causal_lm(a, value) for _, value, _ in entries)}
    if not models:
        return
    for call in a.index.calls:
        model = dotted(call.func)
        labels = keyword(call, "labels")
        if model not in models or labels is None:
            continue
        inputs = keyword(call, "input_ids") or (call.args[0] if call.args else None)
        if _shifted_pair(a, inputs, labels, a.enclosing(call)):
            emit(call, CODE, labels=ast.unparse(labels), inputs=ast.unparse(inputs), model=model)
    for batch in a.index.of(ast.Dict):   # a dataset or collator that hands the model a pre-shifted batch
        fields = {k.value: v for k, v in zip(batch.keys, batch.values) if isinstance(k, ast.Constant)}
        inputs, labels = fields.get("input_ids"), fields.get("labels")
        if labels is not None and _shifted_pair(a, inputs, labels, a.enclosing(batch)):
            emit(batch, CODE, labels=ast.unparse(labels), inputs=ast.unparse(inputs), model=sorted(models)[0])


def _shifted_pair(a, inputs, labels, holder) -> bool:
    """`labels` is `ids[..., 1:]` and `inputs` is `ids[..., :-1]` of the same ids."""
    if inputs is None:
        return False
    shifted, cut = _slice_of(a, labels, holder), _slice_of(a, inputs, holder)
    return bool(shifted and cut and shifted[1] == "next" and cut[1] == "cut" and shifted[0] == cut[0])
