"""KBW109: the evaluation data numbers its classes differently from the training data, seen in the
model's own predictions: each evaluation class is predicted as one consistent, other index.

Criterion: from optimizer step FROM_STEP on, the class predictions (argmax over C >= 2 scores of a
2-D (N, C) output) are paired with their integer targets: in training, at cross_entropy / nll_loss
calls made with grad enabled (the latest TRAIN_WINDOW sampled calls); in evaluation, at those calls
made under no_grad and at the watched model's outputs under no_grad paired with the integer column
of the DataLoader batch fetched under no_grad (same N, values in [0, C)). Targets outside [0, C)
(an ignore_index) are left out. Reported when the training calls hold at least MIN_TRAIN targets
at an accuracy of at least MIN_TRAIN_ACC, the evaluation holds at least MIN_EVAL targets, and in
the evaluation's confusion counts:
- the accuracy is at most EVAL_SHARE of the training accuracy and at least GAP below it;
- mapping each predicted class to the target it most often meets explains at least MIN_MAPPED of
  the evaluation targets and at least GAP more than the accuracy does;
- at least MIN_MOVED predicted classes, each holding at least MIN_CLASS_SHARE of the evaluation and
  meeting one target in at least MIN_PURITY of its samples, map to distinct targets other than
  themselves.
A model that simply does worse on new data smears its errors over many classes; collapsed
predictions (one class for everything) map to one target only; pairs shuffled with their inputs
(label-misalignment) map to nothing. A consistent relabelling is what two class lists give: folders
listed or sorted per split, a class folder missing from one split, labels numbered in order of
first appearance.
"""
from __future__ import annotations

import collections
import itertools
import weakref

import torch

from kb_tools.watch.checks import Check, loss_where, plural
from kb_tools.watch.checks.tensors import iter_tensors

FROM_STEP = 10
TRAIN_WINDOW = 16
MIN_TRAIN = 64
MIN_TRAIN_ACC = 0.6
MIN_EVAL = 48
MAX_EVAL = 8192
MAX_CLASSES = 1000
EVAL_SHARE = 0.6
GAP = 0.3
MIN_MAPPED = 0.75
MIN_MOVED = 2
MIN_CLASS_SHARE = 0.05
MIN_PURITY = 0.7
MAX_KEYS = 8     # tensors of one batch looked at for an integer column


def _pairs(scores, target, classes: int):
    """(target, predicted) -> count for the rows whose target is a class index, or None when the pair
    is not (N, C) scores with (N,) integer targets."""
    if not isinstance(scores, torch.Tensor) or not isinstance(target, torch.Tensor) or scores.dim() != 2 \
            or not scores.is_floating_point() or target.dim() != 1 or target.dtype not in (torch.int64, torch.int32) \
            or target.shape[0] != scores.shape[0] or scores.shape[1] != classes or target.shape[0] == 0:
        return None
    t = target.detach().to(scores.device, torch.int64)
    valid = (t >= 0) & (t < classes)
    pred = scores.detach().argmax(1)
    keys, counts = torch.unique(t[valid] * classes + pred[valid], return_counts=True)
    return {(k // classes, k % classes): c for k, c in zip(keys.tolist(), counts.tolist())}


def _integer_columns(batch) -> list:
    """Weak references to the 1-D integer tensors among a batch's first tensors."""
    return [weakref.ref(v) for v in itertools.islice(iter_tensors(batch), MAX_KEYS)
            if v.dim() == 1 and v.dtype in (torch.int64, torch.int32)]


class EvaluationClassesRenumbered(Check):
    __doc__ = __doc__
    code = "KBW109"
    name = "evaluation-classes-renumbered"
    entry = "class-index-mismatch"
    title = "the evaluation predicts each class as one consistent other index: its data numbers the classes differently"
    confidence = 0.85
    watches_evaluation = True

    def __init__(self, session):
        super().__init__(session)
        self.classes: int | None = None
        self.train = collections.deque(maxlen=TRAIN_WINDOW)   # (correct, total) of the latest training calls
        self.confusion: dict = {}         # (target, predicted) -> count, evaluation from FROM_STEP on
        self.evaluated = 0
        self.first_step: int | None = None
        self.where: str | None = None     # the evaluation loader's or loss's site
        self.columns: list = []           # weak references: integer columns of the latest no_grad batch
        self.loader = None                # weak reference to that batch's DataLoader
        self.counted_output = None        # id of the latest evaluation output already counted

    def on_any_batch(self, loader, batch, serial):
        if torch.is_grad_enabled() or self.session.step < FROM_STEP or self.classes is None:
            self.columns = []
            return
        self.columns = _integer_columns(batch)
        self.loader = weakref.ref(loader)

    def on_root_output(self, model, output, grad_enabled):
        if grad_enabled or not self.columns or self.evaluated >= MAX_EVAL or not isinstance(output, torch.Tensor) \
                or output.dim() != 2 or output.shape[1] != self.classes:
            return
        for ref in self.columns:
            target = ref()
            if target is None or target.shape[0] != output.shape[0]:
                continue
            found = _pairs(output, target, self.classes)
            if found is not None and self._add_evaluation(found):
                self.counted_output = id(output)
                loader = self.loader() if self.loader is not None else None
                if self.where is None and loader is not None:
                    self.where = self.session.loader_site(loader)
                return

    def on_loss(self, call):
        x = call.input
        if call.kind not in ("cross_entropy", "nll_loss") or not isinstance(x, torch.Tensor) or x.dim() != 2 \
                or not 2 <= x.shape[1] <= MAX_CLASSES:
            return
        if self.classes is None:
            if not call.grad_enabled:
                return
            self.classes = int(x.shape[1])   # the training head's width: the classes every split must number
        if self.session.step < FROM_STEP:
            return
        found = _pairs(x, call.target, self.classes)
        if found is None:
            return
        if call.grad_enabled:
            correct = sum(c for (t, p), c in found.items() if t == p)
            self.train.append((correct, sum(found.values())))
        elif id(x) != self.counted_output and self.evaluated < MAX_EVAL and self._add_evaluation(found) \
                and self.where is None:
            self.where = loss_where(call)

    def _add_evaluation(self, found: dict) -> bool:
        if not found:
            return False
        for key, count in found.items():
            self.confusion[key] = self.confusion.get(key, 0) + count
        self.evaluated += sum(found.values())
        if self.first_step is None:
            self.first_step = self.session.step
        return True

    def findings(self) -> list:
        trained = sum(total for _, total in self.train)
        if trained < MIN_TRAIN or self.evaluated < MIN_EVAL:
            return []
        train_acc = sum(correct for correct, _ in self.train) / trained
        total = self.evaluated
        accuracy = sum(c for (t, p), c in self.confusion.items() if t == p) / total
        if train_acc < MIN_TRAIN_ACC or accuracy > EVAL_SHARE * train_acc or accuracy > train_acc - GAP:
            return []
        columns: dict = {}   # predicted -> {target: count}
        for (t, p), c in self.confusion.items():
            columns.setdefault(p, {})[t] = c
        mapping = {p: max(col.items(), key=lambda item: item[1]) for p, col in columns.items()}
        mapped = sum(c for _, c in mapping.values()) / total
        if mapped < MIN_MAPPED or mapped < accuracy + GAP:
            return []
        moved = sorted(((p, t, c, sum(columns[p].values())) for p, (t, c) in mapping.items()
                        if t != p and sum(columns[p].values()) >= MIN_CLASS_SHARE * total
                        and c >= MIN_PURITY * sum(columns[p].values())), key=lambda m: -m[3])
        if len({t for _, t, _, _ in moved}) < MIN_MOVED:
            return []
        shown = ", ".join(f"predicted {p} -> target {t} ({c} of {n})" for p, t, c, n in moved[:4])
        message = (f"on {plural(total, 'evaluation target')} from step {self.first_step}, each predicted class meets "
                   f"one other target index: {shown}; mapped that way the predictions are right for {mapped:.0%} of "
                   f"them, as given for {accuracy:.0%}, while the latest training batches score {train_acc:.0%} "
                   f"({self.where or 'evaluation'}): the evaluation data numbers its {self.classes} classes differently "
                   f"from the training data (each split built its own class list: folders listed or sorted per split, "
                   f"a class missing from one split, labels numbered in order of appearance); build one class-to-index "
                   f"map from the training split and use it for every split")
        return [self.finding(message, where=self.where, step=self.first_step, evidence={
            "evaluation_targets": total, "evaluation_accuracy": round(accuracy, 4), "mapped_accuracy": round(mapped, 4),
            "training_accuracy": round(train_acc, 4), "classes": self.classes,
            "renumbered": [{"predicted": p, "target": t, "count": c, "of": n} for p, t, c, n in moved[:8]]})]
