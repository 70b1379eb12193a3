"""What it finds: inside a module's `forward`, `F.dropout(x, p)` (or `dropout2d`, `dropout3d`,
`alpha_dropout`) called without its `training` argument, or an `nn.Dropout` built and applied
inside `forward`.

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
MESSAGE = ("dropout in forward() without training=self.training stays on after model.eval(): pass "
           "training=self.training, or use an nn.Dropout module built in __init__")

FUNCTIONS = {f"torch.nn.functional.{n}" for n in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                                                  "feature_alpha_dropout")}
MODULES = {f"torch.nn.{n}" for n in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout")}


def check(a, emit):
    for cls in a.index.of(ast.ClassDef):
        for fn in cls.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name != "forward":
                continue
            for call in a.index.calls_in(fn):
                name = a.imp.canon(call.func)
                if name in FUNCTIONS and len(call.args) < 3 and not any(k.arg == "training" for k in call.keywords):
                    emit(call, CODE)
                elif isinstance(call.func, ast.Call) and a.imp.canon(call.func.func) in MODULES:
                    emit(call, CODE)  # nn.Dropout(p)(x): a new module, in training mode, on every call
