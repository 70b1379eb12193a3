"""What it finds: a DataLoader bound to a name with "train" in it, without a sampler, that has
`shuffle=False`, or no `shuffle=True` over a class-folder dataset (ImageFolder, DatasetFolder),
whose samples are sorted by class.

Why it hurts training: every epoch sees the samples in the same order; sorted by class, each
batch holds one class, the model chases the latest class and BatchNorm statistics swing, so
the loss oscillates and accuracy stays near chance.

Example:
    train_loader = DataLoader(ImageFolder("train/"), batch_size=64)

Use instead:
    train_loader = DataLoader(ImageFolder("train/"), batch_size=64, shuffle=True)
"""
import ast

from kb_tools.lint.analysis import dotted, is_false, keyword

CODE, NAME, ENTRY = "KBL009", "train-loader-not-shuffled", "train-shuffle-off"
MESSAGE = "training DataLoader {how}: every epoch sees the samples in the same order (often sorted by class)"


def class_folder(a, expr) -> bool:
    """Whether a dataset is visibly an ImageFolder/DatasetFolder: its samples are sorted by class."""
    value = a.values.get(dotted(expr) or "", expr)
    return isinstance(value, ast.Call) and (
        (a.imp.canon(value.func) or dotted(value.func) or "").rsplit(".", 1)[-1] in ("ImageFolder", "DatasetFolder"))


def check(a, emit):
    for node in a.index.of(ast.Assign):
        if not (isinstance(node.value, ast.Call) and a.kind_of(node.value) == "loader"):
            continue
        name = (dotted(node.targets[0]) or "").lower()
        call = node.value
        if "train" not in name or keyword(call, "sampler") is not None or keyword(call, "batch_sampler") is not None:
            continue
        shuffle = keyword(call, "shuffle")
        if is_false(shuffle):
            emit(call, CODE, how="has shuffle=False")
        elif shuffle is None and len(call.args) < 3 and not any(k.arg is None for k in call.keywords) \
                and call.args and class_folder(a, call.args[0]):
            emit(call, CODE, how="over a class-folder dataset has no shuffle=True (the default is False)")
