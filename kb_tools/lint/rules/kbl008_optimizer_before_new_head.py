"""What it finds: a module (an `nn.` layer) assigned as an attribute of a model after an optimizer
was built over that model's `parameters()`.

Why it hurts training: the optimizer holds the parameter list it was given; the new head's
parameters are not in it, so they get gradients but never change, and the model learns nothing
through them (a frozen random classifier).

Example:
    opt = torch.optim.Adam(model.parameters())
    model.fc = nn.Linear(512, 10)

Use instead:
    model.fc = nn.Linear(512, 10)
    opt = torch.optim.Adam(model.parameters())
"""
import ast

from kb_tools.lint.analysis import dotted, method_call

CODE, NAME, ENTRY = "KBL008", "optimizer-before-new-head", "params-not-in-optimizer"
MESSAGE = ("a new module is attached to {model} after its optimizer was built: its parameters are not in the "
           "optimizer and never train")


def check(a, emit):
    optimizers = []
    for node in sorted(a.index.of(ast.Assign), key=lambda n: n.lineno):
        value = node.value
        if isinstance(value, ast.Call) and a.kind_of(value) == "optimizer" and value.args:
            owner = method_call(value.args[0], "parameters")
            if owner:
                optimizers.append((owner, node.lineno))
        for target in node.targets:
            if isinstance(target, ast.Attribute) and isinstance(value, ast.Call):
                owner = dotted(target.value)
                vname = a.imp.canon(value.func) or ""
                if owner and vname.startswith("torch.nn.") and vname.split(".")[-1][:1].isupper() and any(
                        o == owner and line < node.lineno for o, line in optimizers):
                    emit(node, CODE, model=owner)
