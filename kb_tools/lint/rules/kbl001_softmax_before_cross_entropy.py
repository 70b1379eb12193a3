"""What it finds: the output of a softmax (a function, a tensor method, an `nn.Softmax` layer or a
model whose forward ends in one) passed to `cross_entropy` / `CrossEntropyLoss`; or a model class
of the file whose forward ends in a softmax handed, in one call, together with a `CrossEntropyLoss`
criterion to something that trains it (skorch's `NeuralNetClassifier(Net, criterion=nn.CrossEntropyLoss)`,
a trainer's `model=` and `criterion=`).

Why it hurts training: cross-entropy applies log_softmax itself, so the loss sees probabilities
as logits: the softmax of values in [0, 1] is nearly uniform, the loss has a floor far above
zero and the gradients shrink, so training crawls or stalls.

Example:
    probs = F.softmax(model(x), dim=-1)
    loss = F.cross_entropy(probs, y)

Use instead:
    loss = F.cross_entropy(model(x), y)   # raw logits; softmax only for reporting probabilities
"""
import ast

from kb_tools.lint.analysis import CE_LOSSES

CODE, NAME, ENTRY = "KBL001", "softmax-before-cross-entropy", "double-softmax"
MESSAGE = "softmax output passed to a cross-entropy loss, which applies log_softmax itself: pass the raw logits"
CRITERION_KEYWORDS = {"criterion", "loss", "loss_fn", "loss_func", "loss_function"}
MODEL_KEYWORDS = {"module", "model", "net", "network"}


def _cross_entropy(a, expr) -> bool:
    """`nn.CrossEntropyLoss` (the class, as skorch takes it) or an instance of it."""
    return a.imp.canon(expr.func if isinstance(expr, ast.Call) else expr) in CE_LOSSES


def _ends_in_softmax(a, expr) -> bool:
    """A model class of the file (or a model built from one) whose forward returns a softmax."""
    if isinstance(expr, ast.Name) and expr.id in a.class_output:
        return a.class_output[expr.id] == "softmax"
    return a.built_model_output(expr) == "softmax"


def check(a, emit):
    for call, kind in a.loss_calls:
        if kind == "ce" and a.activation(call.args[0]) == "softmax":
            emit(call, CODE)
    for call in a.index.calls:  # a model and its criterion handed to a trainer together
        criteria = [k.value for k in call.keywords if k.arg in CRITERION_KEYWORDS]
        if not criteria or not _cross_entropy(a, criteria[0]):
            continue
        models = [k.value for k in call.keywords if k.arg in MODEL_KEYWORDS] or call.args[:1]
        if any(_ends_in_softmax(a, m) for m in models):
            emit(call, CODE)
