"""What it finds: a file that puts a model in training mode (`.train()`), or trains it (an optimizer
and a backward() in the file) while building BatchNorm or Dropout layers, and never in evaluation
mode (no `.eval()`, no `.train(False)` anywhere), with an evaluation loop that calls the model: a
loop under or around a `torch.no_grad()` / `torch.inference_mode()` block, over a loader named for
validation or test, or in a function named for evaluation (`eval_net()`, `validate()`; not a
pytest `test_...`), that calls no `backward()`. That evaluation runs in training mode.

Why it hurts training: in training mode dropout still drops units and BatchNorm normalises each
evaluation batch with its own statistics and folds them into its running averages, so the
validation numbers are noisy and pessimistic, model selection and early stopping act on them,
and the test batches change the model's BatchNorm state.

Example:
    model.train()
    for x, y in train_loader: ...
    with torch.no_grad():
        for x, y in val_loader:
            acc += (model(x).argmax(1) == y).sum()

Use instead:
    model.eval()
    with torch.no_grad():
        for x, y in val_loader: ...
    model.train()
"""
import ast

from kb_tools.lint.analysis import BACKWARD, dotted, method_call, to_eval_mode, within

CODE, NAME, ENTRY = "KBL021", "evaluation-in-train-mode", "train-eval-mode"
MESSAGE = "{what}"
TRAIN_CALLED = ("{model}.train() is called in this file and nothing calls .eval(): this evaluation loop runs with "
                "dropout on and BatchNorm updating its running statistics")
NEVER_SWITCHED = ("{model} is trained here and nothing calls .eval() (the file builds {layers} layers): this "
                  "evaluation loop runs in training mode, with dropout on and BatchNorm updating its running statistics")
EVAL_FUNCTION_WORDS = ("eval", "valid", "test")
STOCHASTIC = ("BatchNorm", "InstanceNorm", "Dropout", "dropout")   # layers that act differently in eval mode
NO_GRAD = {"torch.no_grad", "torch.inference_mode", "torch.set_grad_enabled"}
EVAL_WORDS = ("val", "test", "eval", "dev_loader", "dev_dl")


def _evaluation_loops(a) -> list:
    """Loops that evaluate: under (or around) a no_grad/inference_mode block, or over a validation or
    test loader, calling no backward()."""
    guarded = [w for w in a.index.of(ast.With, ast.AsyncWith) if any(
        isinstance(i.context_expr, ast.Call) and (a.imp.canon(i.context_expr.func) or "") in NO_GRAD
        for i in w.items)]
    guarded += [fn for fn in a.index.of(ast.FunctionDef) if any(
        (a.imp.canon(d.func if isinstance(d, ast.Call) else d) or "") in NO_GRAD for d in fn.decorator_list)]
    out = []
    for loop in a.index.of(ast.For, ast.AsyncFor):
        if any(method_call(c, *BACKWARD) is not None for c in a.run_calls(loop)):
            continue
        words = (ast.unparse(loop.iter) or "").lower()
        over_eval = any(w in words for w in EVAL_WORDS)
        fn = a.enclosing(loop)
        in_eval_function = fn is not None and not fn.name.startswith("test_") and any(   # a pytest test is not
            part.startswith(w) for part in fn.name.lower().split("_") for w in EVAL_FUNCTION_WORDS)   # evaluation
        if over_eval or in_eval_function or any(within(g, loop) or within(loop, g) for g in guarded):
            out.append(loop)
    return out


def check(a, emit):
    calls = a.index.calls
    if any(to_eval_mode(c) is not None for c in calls):
        return
    trained = [method_call(c, "train") for c in calls if method_call(c, "train") and not c.args and not c.keywords]
    built = {a.imp.canon(c.func) or "" for c in calls}
    layers = sorted({name.rsplit(".", 1)[-1] for name in built if name.startswith("torch.nn.")
                     and any(w in name.rsplit(".", 1)[-1] for w in STOCHASTIC)})
    message = TRAIN_CALLED
    if not trained and layers and any(method_call(c, *BACKWARD) is not None for c in calls):
        # never switched at all: the models this file's optimizers train (not a model class's own
        # configure_optimizers(), whose training happens elsewhere), in a file with such layers
        trained = [o for c in calls if a.kind_of(c) == "optimizer" for o in a.parameter_owners(c)
                   if o != "self" and not o.startswith("self.")]
        message = NEVER_SWITCHED
    if not trained:
        return
    loops = _evaluation_loops(a)
    calls_a_model = {id(loop) for loop in loops if any(
        isinstance(c.func, (ast.Name, ast.Attribute)) and (dotted(c.func) in trained or dotted(c.func) in a.model_output
                                                            or (dotted(c.func) or "").endswith(".generate"))
        for c in a.run_calls(loop))}
    for loop in loops:
        if id(loop) in calls_a_model and not any(within(other, loop) and other is not loop for other in loops):
            emit(loop, CODE, what=message.format(model=trained[0], layers="/".join(layers[:2])))
            return
