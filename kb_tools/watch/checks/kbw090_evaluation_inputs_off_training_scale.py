"""KBW090: a model is evaluated on inputs on another scale than it was trained on: a preprocessing
step (Normalize, a fitted scaler, a division by 255) is applied to one split and not the other.

Criterion: for each watched model (up to MAX_MODELS), the first input of a call (a float tensor of
at least MIN_VALUES values) is summarized by its mean and standard deviation over all its values:
on up to MAX_CALLS training calls (grad enabled, model in training mode) and up to MAX_CALLS
evaluation calls (under no_grad or in eval mode, on a batch from a DataLoader no backward() has
followed yet: checks.loaders.LoaderRoles; a call on a training batch, a teacher's say, is not an
evaluation call). With at least MIN_TRAIN training calls and MIN_EVAL evaluation calls, the
evaluation inputs' mean standard deviation is at least RATIO times the training inputs' or at most
1/RATIO of it, or their means differ by at least SHIFT training standard deviations. Augmentation
that widens the training inputs, or an evaluation population that sits a little off centre, stays
well inside those bounds; a missing Normalize (inputs in [0, 1] against standardized ones: about a
quarter of the spread), min-max scaling in place of standardization, unscaled features or raw
0-255 pixels do not. (KBW023 judges the first layer's inputs at a factor of 10 on sampled steps;
this check reads the model's own inputs at the finer bound, and counts as evaluation only batches
that no backward() follows.) Each summary reads two numbers of a call's input: on an accelerator
that waits for the call's inputs, on the first MAX_CALLS calls of each kind only.
"""
from __future__ import annotations

import math

import torch

from kb_tools.watch.checks.loaders import LoaderRoleCheck
from kb_tools.watch.checks.tensors import first_tensor

MIN_VALUES = 64
MAX_CALLS = 6
MIN_TRAIN = 3
MIN_EVAL = 2
RATIO = 3.0
SHIFT = 3.0
MAX_MODELS = 4


class _Inputs:
    __slots__ = ("name", "train", "eval", "eval_step")

    def __init__(self, name: str):
        self.name = name
        self.train: list = []   # [(mean, std)] of up to MAX_CALLS training calls
        self.eval: list = []    # the same for evaluation calls
        self.eval_step = None


class EvaluationInputsOffTrainingScale(LoaderRoleCheck):
    __doc__ = __doc__
    code = "KBW090"
    name = "evaluation-inputs-off-training-scale"
    entry = "normalization-mismatch"
    title = "evaluation inputs on another scale than the training inputs: preprocessing applied to one split only"
    confidence = 0.6

    def __init__(self, session):
        super().__init__(session)
        self.models: dict[int, _Inputs] = {}

    def on_root_input(self, model, args, grad_enabled):
        module = model.module
        if module is None:
            return
        training = grad_enabled and module.training
        if not training and (self.roles.latest is None or self.roles.latest.trained):
            return   # not evaluation data: no loader, or a training batch (a teacher's or EMA model's call)
        m = self.models.get(id(model))
        if m is None:
            if len(self.models) >= MAX_MODELS:
                return
            m = self.models[id(model)] = _Inputs(model.cls)
        kept = m.train if training else m.eval
        if len(kept) >= MAX_CALLS:
            return
        x = first_tensor(args)
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() < MIN_VALUES:
            return
        std, mean = torch.std_mean(x.detach().float())
        pair = torch.stack([mean, std]).tolist()
        if all(math.isfinite(v) for v in pair):
            kept.append(tuple(pair))
            if not training and m.eval_step is None:
                m.eval_step = self.session.step

    def findings(self) -> list:
        out = []
        for m in self.models.values():
            if len(m.train) < MIN_TRAIN or len(m.eval) < MIN_EVAL:
                continue
            train_mean, train_std = (sum(v) / len(m.train) for v in zip(*m.train))
            eval_mean, eval_std = (sum(v) / len(m.eval) for v in zip(*m.eval))
            if train_std <= 0:
                continue
            ratio, shift = eval_std / train_std, abs(eval_mean - train_mean) / train_std
            if 1 / RATIO < ratio < RATIO and shift < SHIFT:
                continue
            message = (f"{m.name} is evaluated on inputs with mean {eval_mean:.3g} and standard deviation "
                       f"{eval_std:.3g}, against {train_mean:.3g} and {train_std:.3g} in training ({len(m.eval)} and "
                       f"{len(m.train)} calls; spread ratio {ratio:.2g}, shift {shift:.2g} training standard "
                       f"deviations): a preprocessing step (Normalize, a fitted scaler, a division by 255) is "
                       f"applied to one split and not the other. Build both splits' inputs through the same "
                       f"transform, with the statistics fitted on the training split")
            out.append(self.finding(message, step=m.eval_step, evidence={
                "model": m.name, "train_mean": train_mean, "train_std": train_std, "eval_mean": eval_mean,
                "eval_std": eval_std, "std_ratio": ratio, "shift": shift,
                "train_calls": len(m.train), "eval_calls": len(m.eval)}))
        return out
