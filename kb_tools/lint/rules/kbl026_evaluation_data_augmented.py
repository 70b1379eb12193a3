"""What it finds: an evaluation dataset built with a transform that draws random augmentations: a
dataset call with `transform=` (or `transforms=`) a torchvision `Compose` holding a random transform
(`RandomResizedCrop`, `RandomCrop`, `ColorJitter`, `RandAugment`, `RandomErasing`, ...), given directly
or through a name every assignment of which is such a `Compose`, or a dict entry looked up by a constant
key (random flips alone do not count: most image tasks are flip-invariant, so they add little noise and
no bias), where the dataset is visibly for evaluation: `train=False`, a `split` of val/test, a name or a
path argument that says val, valid, test or eval, or a transform looked up under such a key
(`data_transforms["val"]`). A transform wrapped in another call (a multi-view generator for a contrastive loss) and
files that speak of test-time augmentation are left alone.

Why it hurts training: the random transforms draw new parameters on every `__getitem__`, so each
evaluation pass sees a different, harder version of the data. The metric is noisy from one evaluation
to the next and biased low, and early stopping and checkpoint selection follow the noise.

Example:
    val_set = datasets.ImageFolder(valdir, transform=train_transform)

Use instead:
    val_set = datasets.ImageFolder(valdir, transform=eval_transform)   # Resize, CenterCrop, ToTensor, Normalize
"""
import ast
import re

from kb_tools.lint.analysis import dotted, is_false, keyword

CODE, NAME, ENTRY = "KBL026", "evaluation-data-augmented", "eval-augmentation-on"
MESSAGE = ("the evaluation dataset {name} is built with a transform that draws random augmentations ({which}): "
           "each evaluation sees different, harder inputs, so the metric is noisy and biased low; give it a "
           "deterministic evaluation transform")
RANDOM = ("Random", "ColorJitter", "RandAugment", "AutoAugment", "TrivialAugmentWide", "AugMix", "GaussianBlur",
          "ElasticTransform")
FLIPS = ("RandomHorizontalFlip", "RandomVerticalFlip")
EVAL_NAME = re.compile(r"(?:^|_)(?:val|valid|validation|test|testing|eval|evaluation)"
                       r"(?:_|$|dir|set|data|ds|dataset|path|root|files|list)")
TTA = re.compile(r"\btta\b|test[ _-]?time[ _-]?aug", re.IGNORECASE)


def _random_transforms(a, expr, depth: int = 0) -> list:
    """The random transforms of a torchvision Compose that `expr` is (through names: every assignment
    must be one); [] when any path is not."""
    if depth > 3 or expr is None:
        return []
    if isinstance(expr, ast.IfExp):
        body, other = _random_transforms(a, expr.body, depth + 1), _random_transforms(a, expr.orelse, depth + 1)
        return body if body and other else []
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant) and dotted(expr.value):
        tables = [v for _, v, _ in a.history.get(dotted(expr.value), []) if isinstance(v, ast.Dict)]
        return next((_random_transforms(a, value, depth + 1) for table in tables for key, value in
                     zip(table.keys, table.values) if isinstance(key, ast.Constant) and key.value == expr.slice.value), [])
    name = dotted(expr)
    if name is not None and not isinstance(expr, ast.Call):
        values = [v for _, v, _ in a.history.get(name, [])]
        paths = [_random_transforms(a, v, depth + 1) for v in values]
        return paths[0] if paths and all(paths) else []
    if not isinstance(expr, ast.Call) or not (a.imp.canon(expr.func) or "").startswith("torchvision.transforms") \
            or not (a.imp.canon(expr.func) or "").endswith("Compose") or not expr.args \
            or not isinstance(expr.args[0], (ast.List, ast.Tuple)):
        return []
    names = [(a.imp.canon(t.func) or "").rsplit(".", 1)[-1] for t in expr.args[0].elts if isinstance(t, ast.Call)]
    found = [n for n in names if n.startswith(RANDOM)]
    return found if any(n not in FLIPS for n in found) else []   # flips alone barely change a flip-invariant task


def _for_evaluation(a, call, transform) -> str | None:
    """How the dataset shows it is for evaluation: its name, `train=False`, a split, a path argument, or
    the key its transform is looked up under (`data_transforms["val"]`)."""
    if isinstance(transform, ast.Subscript) and isinstance(transform.slice, ast.Constant) \
            and str(transform.slice.value).lower() in ("val", "valid", "validation", "test", "eval"):
        return f"({ast.unparse(transform)})"
    target = a.assigned.get(id(call))
    if target and EVAL_NAME.search(target.rsplit(".", 1)[-1].lower()):
        return target
    if is_false(keyword(call, "train")):
        return "(train=False)"
    for arg in list(call.args) + [k.value for k in call.keywords if k.arg not in ("transform", "transforms")]:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.lower() in (
                "val", "valid", "validation", "test", "eval"):
            return f"({arg.value!r})"
        name = dotted(arg) or ""
        if name and EVAL_NAME.search(name.rsplit(".", 1)[-1].lower()):
            return f"({name})"
    return None


def check(a, emit):
    if TTA.search(a.text):
        return
    for call in a.index.calls:
        transform = keyword(call, "transform") or keyword(call, "transforms")
        if transform is None:
            continue
        which = _random_transforms(a, transform)
        name = _for_evaluation(a, call, transform) if which else None
        if name:
            emit(call, CODE, name=name, which=", ".join(dict.fromkeys(which)))
