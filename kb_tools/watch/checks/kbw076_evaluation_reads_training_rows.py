"""KBW076: the rows a model is evaluated on are rows it trained on in the same run: a validation
split that overlaps the training split (a split drawn differently per rank or per fold, rows of one
item on both sides), or a validation loop that reads the training data.

Criterion: rows are the first dimension of the first tensor a watched model receives, or the
tensors of a list of same-shaped tensors given as its first argument (at least 8 values each; an
nn.Parameter passed as the input is not data), compared by an exact fingerprint
(tensors.row_fingerprints). Training rows: the model's inputs with grad enabled, on every step for
inputs in CPU memory and on sampled steps for inputs on an accelerator (at least MIN_TRAIN_ROWS, in
batches with at most MAX_DUPLICATES of their rows repeated
inside the same batch: data with many equal rows is not judged). Evaluation rows: the inputs of a
run of at least MIN_PASS consecutive calls of the model under no_grad, grouped by the DataLoader
they came from, at most MAX_EVAL_ROWS per run. A run is part of a training step, not an
evaluation, when a backward() ends it, or when it has at most MAX_STEP_CALLS calls and the model's
next grad-enabled call trains on rows at least half of which the run read (targets, pseudo-labels
or a sample selection computed first under no_grad). Every group of at least MIN_SOURCE_ROWS
evaluation rows has at least MIN_SHARE of them among the training rows seen before it (on an
accelerator the sampled steps see only part of the training rows, so the share of a full overlap
reads lower than 1). When another group shares (almost) no rows with training, a group counts only
when its DataLoader is not a training loader and reads another dataset object than every training
loader: a training-accuracy pass beside a clean validation split is silent, a validation set of its
own whose rows were also trained on is not. Augmented training rows differ from their source and
are not matched. A run whose sampled training losses are all kl_div or scored against the model's
own input (deep clustering, autoencoders: no labels are learned) is not judged.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, names, plural
from kb_tools.watch.checks.tensors import fingerprint, first_tensor, row_fingerprints

MIN_TRAIN_ROWS = 64
MAX_DUPLICATES = 0.02
MIN_PASS = 2
MAX_STEP_CALLS = 4         # a no_grad run this short, followed by training on its rows, belongs to the step
MAX_EVAL_ROWS = 8192
MIN_SOURCE_ROWS = 32
MIN_SHARE = 0.25
MAX_TRAIN_ROWS = 100_000   # fingerprints kept per model (a few MB)
MAX_MODELS = 4
MAX_SOURCES = 8


class _Model:
    def __init__(self, name: str):
        self.name = name
        self.train: set = set()
        self.train_rows = 0
        self.repeated = 0          # rows equal to another row of the same training batch
        self.pending: list = []    # [(loader key, fingerprints)] of the current run of no_grad calls
        self.tentative: list = []  # a finished run, until the step's backward() shows it was no part of it
        self.sources: dict = {}    # loader key -> [rows, rows seen in training, first step]
        self.train_loaders: set = set()  # loader keys whose batches the model trained on


class EvaluationReadsTrainingRows(Check):
    __doc__ = __doc__
    code = "KBW076"
    name = "evaluation-reads-training-rows"
    entry = "data-leakage"
    title = "the rows the model is evaluated on are rows it trained on in this run"
    confidence = 0.6

    def __init__(self, session):
        super().__init__(session)
        self.models: dict = {}       # id(ModelInfo) -> _Model
        self.last_loader = None      # id of the DataLoader that yielded the latest batch
        self.eval_rows_left = MAX_EVAL_ROWS
        self.datasets: dict = {}     # id(DataLoader) -> id(its dataset)
        self.inputs = (None, set())  # (step, fingerprints of the models' first inputs with grad enabled)
        self.label_losses = 0        # sampled training loss calls scored against something else than the input

    def on_any_batch(self, loader, batch, serial):
        self.last_loader = id(loader)
        if self.last_loader not in self.datasets and len(self.datasets) < 4 * MAX_SOURCES:
            self.datasets[self.last_loader] = id(getattr(loader, "dataset", None))

    def _model(self, info):
        m = self.models.get(id(info))
        if m is None and len(self.models) < MAX_MODELS:
            m = self.models[id(info)] = _Model(info.cls)
        return m

    def on_root_input(self, model, args, grad_enabled):
        if grad_enabled:
            self._training_input(model, args)
        else:
            self._evaluation_input(model, args)

    def _training_input(self, model, args) -> None:
        m = self._model(model)
        if m is None:
            return
        rows = self._rows(args, cpu_only=not self.session.sampled)
        self._close(m, next_rows=rows)
        if self.session.sampled:   # what on_loss compares targets with: the inputs of this step
            x = first_tensor(args)
            step = self.session.step
            if self.inputs[0] != step:
                self.inputs = (step, set())
            if x is not None and len(self.inputs[1]) < 8:
                self.inputs[1].add(fingerprint(x))
        if rows is None:
            return
        if len(m.train_loaders) < MAX_SOURCES:
            m.train_loaders.add(self.last_loader)
        m.repeated += len(rows) - len(set(rows))
        m.train_rows += len(rows)
        if len(m.train) < MAX_TRAIN_ROWS:
            m.train.update(rows)

    def _evaluation_input(self, model, args) -> None:
        m = self.models.get(id(model))
        if self.eval_rows_left <= 0 or m is None or m.train_rows == 0:
            return
        rows = self._rows(args)
        if rows is None:
            return
        self.eval_rows_left -= len(rows)
        m.pending.append((self.last_loader, rows))

    def on_loss(self, call):
        """Count training losses with targets of their own: a model trained only to reconstruct its
        input or to match its own sharpened outputs (kl_div: deep clustering) learns no labels, and
        scoring it on its training rows is how such methods are evaluated."""
        y = call.target
        if not call.grad_enabled or call.kind == "kl_div" or not isinstance(y, torch.Tensor) or y.numel() == 0:
            return
        if self.inputs[0] == self.session.step and fingerprint(y) not in self.inputs[1]:
            self.label_losses += 1   # (a step whose inputs were not seen, a model's very first call, is not judged)

    def on_any_backward(self, tensors):
        for m in self.models.values():
            self._close(m, inside_step=True)

    def on_end(self):
        for m in self.models.values():
            if len(m.pending) >= MIN_PASS:
                m.tentative, m.pending = m.tentative + m.pending, []
            self._commit(m)

    @staticmethod
    def _rows(args, cpu_only: bool = False):
        """Fingerprints of the rows of the first input; a list of same-shaped tensors (the images a
        torchvision-style detector takes) is one row per tensor. With `cpu_only`, None for an input
        on an accelerator (reading its fingerprints would synchronise an unsampled step)."""
        first = args[0] if args else None
        if isinstance(first, (list, tuple)) and 2 <= len(first) <= 1024 \
                and all(isinstance(t, torch.Tensor) for t in first) and len({t.shape for t in first}) == 1:
            if cpu_only and first[0].device.type != "cpu":
                return None
            return row_fingerprints(torch.stack([t.detach() for t in first]))
        x = first_tensor(args)
        if x is None or isinstance(x, torch.nn.Parameter) or (cpu_only and x.device.type != "cpu"):
            return None   # a parameter passed in (a tied decoder weight given to a loss module) is not data
        return row_fingerprints(x)

    def _close(self, m: _Model, next_rows: list | None = None, inside_step: bool = False) -> None:
        """A grad-enabled call or a backward() ends the run of no_grad calls. The run is part of the
        training step, not an evaluation, when a backward() ends it directly, or when it is short and a
        grad-enabled call before the step's backward() trains on at least half of its rows (targets,
        pseudo-labels or a sample selection computed first under no_grad); otherwise it is committed
        as an evaluation at that backward() (or at the end)."""
        if m.pending:
            if inside_step:
                m.pending = []
            elif len(m.pending) >= MIN_PASS:
                m.tentative, m.pending = m.tentative + m.pending, []
            else:
                m.pending = []
        if m.tentative and next_rows and len(m.tentative) <= MAX_STEP_CALLS:
            run: set = set()
            for _, rows in m.tentative:
                run.update(rows)
            if sum(r in run for r in next_rows) >= 0.5 * len(next_rows):
                m.tentative = []
        if inside_step and m.tentative:
            self._commit(m)

    def _commit(self, m: _Model) -> None:
        for key, rows in m.tentative:
            src = m.sources.get(key)
            if src is None:
                if len(m.sources) >= MAX_SOURCES:
                    continue
                src = m.sources[key] = [0, 0, self.session.step]
            src[0] += len(rows)
            src[1] += sum(r in m.train for r in rows)
        m.tentative = []

    def findings(self) -> list:
        out = []
        if not self.label_losses:
            return out
        for m in self.models.values():
            if m.train_rows < MIN_TRAIN_ROWS or m.repeated > MAX_DUPLICATES * m.train_rows:
                continue
            judged = [(key, rows, seen, step) for key, (rows, seen, step) in m.sources.items()
                      if rows >= MIN_SOURCE_ROWS]
            if not judged:
                continue
            if any(seen < MIN_SHARE * rows for _, rows, seen, _ in judged):
                # a clean stream beside the overlapping ones: only held-out sets of their own count
                judged = [j for j in judged if j[2] >= MIN_SHARE * j[1] and not self._training_data(m, j[0])]
                if not judged:
                    continue
            rows = sum(j[1] for j in judged)
            seen = sum(j[2] for j in judged)
            step = min(j[3] for j in judged)
            loaders = list(dict.fromkeys(self._loader(key) + (", which also feeds training"
                                                              if key is not None and key in m.train_loaders else "")
                                         for key, *_ in judged))
            message = (f"{seen} of {plural(rows, 'row')} {m.name} was evaluated on under no_grad (from "
                       f"{names(loaders)}, from step {step}) are exact copies of rows it trained on earlier in "
                       f"this run ({seen / rows:.0%}): the evaluation scores memorised rows, not unseen data. "
                       f"Split once, by item, before any per-rank or per-fold seeding, and evaluate on the "
                       f"held-out split (if this pass is meant to measure training accuracy, add a held-out one)")
            out.append(self.finding(message, step=step, evidence={
                "model": m.name, "evaluation_rows": rows, "rows_seen_in_training": seen,
                "training_rows_sampled": m.train_rows, "sources": loaders}))
        return out

    def _training_data(self, m: _Model, key) -> bool:
        """Whether the loader `key` reads training data by design: it is a training loader, or it reads
        the dataset object a training loader reads (a training-accuracy pass); unknown without a loader."""
        if key is None or key in m.train_loaders:
            return True
        dataset = self.datasets.get(key)
        return dataset is not None and dataset in {self.datasets.get(k) for k in m.train_loaders}

    def _loader(self, key) -> str:
        info = self.session.loaders.get(key) if key is not None else None
        if info is None:
            return "tensors indexed without a DataLoader" if key is None else "a DataLoader"
        return f"the DataLoader created at {info.site}" if info.site else "a DataLoader"
