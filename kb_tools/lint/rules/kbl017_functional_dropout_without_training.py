"""What it finds: inside a module's `forward`, `F.dropout(x, p)` (or `dropout2d`, `dropout3d`,
`alpha_dropout`) called without its `training` argument, or an `nn.Dropout` built and applied
inside `forward`; or called with `training=True` in a module whose other methods build
`nn.Dropout` layers (those switch off at `eval()`, this one does not). Silent on `training=True`
in a module with no Dropout layers, or whose names speak of Monte Carlo dropout, Bayesian
layers or uncertainty: dropout kept on at evaluation on purpose.

Why it hurts training: the functional dropout's `training` argument defaults to True and knows
nothing of `model.eval()`, and a Dropout module created during the call is in training mode, so
dropout stays on at evaluation: outputs are random, two evaluations of the same input differ and
validation metrics read worse and noisier than the model is.

Example:
    def forward(self, x):
        return self.fc2(F.dropout(F.relu(self.fc1(x)), p=0.5))

Use instead:
    def forward(self, x):
        return self.fc2(F.dropout(F.relu(self.fc1(x)), p=0.5, training=self.training))
"""
import ast

CODE, NAME, ENTRY = "KBL017", "functional-dropout-without-training", "functional-dropout-in-eval"
MESSAGE = ("dropout in forward() {how} stays on after model.eval(): pass training=self.training, or use an "
           "nn.Dropout module built in __init__")

FUNCTIONS = {f"torch.nn.functional.{n}" for n in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                                                  "feature_alpha_dropout")}
MODULES = {f"torch.nn.{n}" for n in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout")}
MONTE_CARLO_WORDS = ("monte", "bayes", "uncertain", "mcdropout", "mc_dropout")


def _training_true(call) -> bool:
    """`training=True` given as a keyword or as the third positional argument."""
    given = [k.value for k in call.keywords if k.arg == "training"] or call.args[2:3]
    return bool(given) and isinstance(given[0], ast.Constant) and given[0].value is True


def _dropout_layers_beside(a, cls, forward) -> bool:
    """Whether a method of the class other than forward builds an nn.Dropout layer."""
    return any(a.imp.canon(call.func) in MODULES for fn in cls.body if fn is not forward
               and isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) for call in a.index.calls_in(fn))


def _speaks_of_monte_carlo(cls) -> bool:
    """Whether names in the class (its own, its methods', arguments' and attributes') say that
    dropout stays on at evaluation by design."""
    names = {cls.name.lower()}
    for node in ast.walk(cls):
        for field in ("id", "attr", "name", "arg"):
            value = getattr(node, field, None)
            if isinstance(value, str):
                names.add(value.lower())
    return any(w in n for n in names for w in MONTE_CARLO_WORDS) or any("mc" in n.split("_") for n in names)


def check(a, emit):
    for cls in a.index.of(ast.ClassDef):
        for fn in cls.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name != "forward":
                continue
            for call in a.index.calls_in(fn):
                name = a.imp.canon(call.func)
                if name in FUNCTIONS and len(call.args) < 3 and not any(k.arg == "training" for k in call.keywords):
                    emit(call, CODE, how="without training=self.training")
                elif name in FUNCTIONS and _training_true(call) and _dropout_layers_beside(a, cls, fn) \
                        and not _speaks_of_monte_carlo(cls):
                    emit(call, CODE, how="with training=True, beside nn.Dropout layers that do switch off,")
                elif isinstance(call.func, ast.Call) and a.imp.canon(call.func.func) in MODULES:
                    # nn.Dropout(p)(x): a new module, in training mode, on every call
                    emit(call, CODE, how="from an nn.Dropout built during the call")
