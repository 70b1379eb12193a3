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
that no backward() follows.) A model whose training inputs carry a graph, made by trained
layers (a classifier on an encoder's features; the layers of a model whose forward() is called
directly, watched one by one), sees inputs that move with the weights as training goes on: each
of its evaluation calls is compared with its latest MAX_CALLS training calls before it, not its
first. Each summary reads two numbers of a call's input: on an accelerator
that waits for the call's inputs, on the first MAX_CALLS calls of each kind only (the latest
computed training inputs are summarized on the device and read at an evaluation call). A model that
transforms its inputs in eval mode only (below) is meant to be given raw inputs then, and is not
judged this way.

Criterion, an input transformed twice in evaluation: a module inside a watched model, without
parameters or submodules, that on sampled steps receives one of the model's own input tensors
(2 or more dimensions, at most MAX_FEATURES values along the last one, read as features), returns
that very tensor in training mode on every call seen (at least one) and another tensor in eval
mode: an input transform that acts in evaluation only (a scaler kept in the model to scale raw
inputs at prediction time). On up to 2 * MAX_CALLS eval-mode calls, the features it receives and
returns are compared with those it passed through in training (per feature: mean and standard
deviation, averaged over up to MAX_CALLS training calls). Reported when on at least MIN_EVAL of them
the received features match the training ones (each feature's mean within MATCH_SHIFT = 0.5 of its
training standard deviation and its spread within a factor MATCH_RATIO = 2), and on every call that
matched, the returned ones do not (some feature's mean SHIFT = 3 or more training standard
deviations away, or its spread RATIO = 3 times larger or smaller): data already on the training scale is
transformed a second time. The intended use, raw inputs at prediction time, does not match the
training features on the way in and is not counted; an output transform (unscaling predictions)
receives computed values, not the model's inputs, and is not watched.
"""
from __future__ import annotations

import collections
import math

import torch

from kb_tools.watch.checks.loaders import LoaderRoleCheck
from kb_tools.watch.checks.tensors import feature_moments, first_tensor

MIN_VALUES = 64
MAX_CALLS = 6
MIN_TRAIN = 3
MIN_EVAL = 2
RATIO = 3.0
SHIFT = 3.0
MAX_MODELS = 4
MAX_FEATURES = 4096
MAX_TRANSFORMS = 8
MATCH_SHIFT = 0.5
MATCH_RATIO = 2.0


class _Inputs:
    __slots__ = ("name", "train", "eval", "eval_step", "computed", "recent", "windows")

    def __init__(self, name: str):
        self.name = name
        self.computed = False   # a training input came out of trained layers: not the model's data
        self.recent: collections.deque = collections.deque(maxlen=MAX_CALLS)  # [mean, std] tensors, latest calls
        self.windows: list = []  # (mean, std) of `recent` at each evaluation call kept in `eval`
        self.train: list = []   # [(mean, std)] of up to MAX_CALLS training calls
        self.eval: list = []    # the same for evaluation calls
        self.eval_step = None


class _Transform:
    __slots__ = ("name", "model", "owner", "identity", "moved", "train", "eval", "matched", "hits", "step", "worst")

    def __init__(self, name: str, model: str, owner: int):
        self.name, self.model, self.owner = name, model, owner
        self.identity = True   # returned its input unchanged on every training-mode call seen
        self.moved = False     # returned another tensor in eval mode
        self.train: list = []  # [(per-feature means, per-feature stds)] of up to MAX_CALLS training calls
        self.eval = 0          # eval-mode calls measured (up to 2 * MAX_CALLS)
        self.matched = 0       # of those, calls whose input matched the training features
        self.hits = 0          # of those, calls whose output did not
        self.step = None       # the first such call's step
        self.worst = None      # (feature, eval mean, eval std, training mean, training std) of that call


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
        self.transforms: dict[int, _Transform] = {}
        self.call_inputs: dict[int, tuple] = {}  # id of each float input of the model call under way -> (name, id) of the model
        self.pending: dict[int, torch.Tensor] = {}  # id(transform) -> its input, between its input and output hooks

    def on_root_input(self, model, args, grad_enabled):
        module = model.module
        if module is None:
            return
        if self.session.sampled:
            self.call_inputs = {id(a): (model.cls, id(model)) for a in args if isinstance(a, torch.Tensor)
                                and a.is_floating_point() and a.layout == torch.strided and a.dim() >= 2
                                and a.shape[-1] <= MAX_FEATURES}
        training = grad_enabled and module.training
        if not training and (self.roles.latest is None or self.roles.latest.trained):
            return   # not evaluation data: no loader, or a training batch (a teacher's or EMA model's call)
        m = self.models.get(id(model))
        if m is None:
            if len(self.models) >= MAX_MODELS:
                return
            m = self.models[id(model)] = _Inputs(model.cls)
        kept = m.train if training else m.eval
        x = first_tensor(args)
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.layout != torch.strided \
                or x.numel() < MIN_VALUES:
            return   # a sparse input has no std_mean
        if training and x.grad_fn is not None:
            # made by trained layers: its scale moves with the weights, so evaluation calls are compared
            # with the training calls just before them (kept on the device: no wait for them here)
            m.computed = True
            std, mean = torch.std_mean(x.detach().float())
            m.recent.append(torch.stack([mean, std]))
            return
        if len(kept) >= MAX_CALLS:
            return
        window = None
        if not training and m.computed:
            if len(m.recent) < MIN_TRAIN:
                return
            window = tuple(torch.stack(list(m.recent)).mean(0).tolist())
        std, mean = torch.std_mean(x.detach().float())
        pair = torch.stack([mean, std]).tolist()
        if all(math.isfinite(v) for v in pair + list(window or ())):
            kept.append(tuple(pair))
            if window is not None:
                m.windows.append(window)
            if not training and m.eval_step is None:
                m.eval_step = self.session.step

    def on_root_output(self, model, output, grad_enabled):
        if self.call_inputs or self.pending:
            self.call_inputs, self.pending = {}, {}

    def on_module_input(self, module, args):
        if not self.call_inputs or module._parameters or module._modules or not args:
            return
        x = args[0]
        model = self.call_inputs.get(id(x)) if isinstance(x, torch.Tensor) else None
        if model is None:
            return
        t = self.transforms.get(id(module))
        if t is None:
            if len(self.transforms) >= MAX_TRANSFORMS:
                return
            t = self.transforms[id(module)] = _Transform(f"{self.session.module_name(module)} ({type(module).__name__})",
                                                         *model)
        if t.identity and (module.training or t.eval < 2 * MAX_CALLS):
            self.pending[id(module)] = x

    def on_module_forward(self, module, output, grad_enabled):
        x = self.pending.pop(id(module), None) if self.pending else None
        if x is None:
            return
        t = self.transforms[id(module)]
        if module.training:
            if output is not x:
                t.identity = False
            elif len(t.train) < MAX_CALLS and x.shape[:-1].numel() >= 2 and (not t.train or len(t.train[0][0]) == x.shape[-1]):
                t.train.append(feature_moments(x))
            return
        if output is x or not isinstance(output, torch.Tensor) or output.shape != x.shape or not output.is_floating_point() \
                or not t.train or len(t.train[0][0]) != x.shape[-1] or x.shape[:-1].numel() < 2 or t.eval >= 2 * MAX_CALLS:
            return
        t.moved = True
        t.eval += 1
        train_mean, train_std = (torch.tensor(v, device="cpu").mean(0) for v in zip(*t.train))
        seen = train_std > 0
        in_mean, in_std = (torch.tensor(v, device="cpu") for v in feature_moments(x))
        out_mean, out_std = (torch.tensor(v, device="cpu") for v in feature_moments(output))
        if not bool(seen.any()):
            return
        matched = bool(((in_mean - train_mean).abs() <= MATCH_SHIFT * train_std)[seen].all()) and \
            bool(((in_std <= MATCH_RATIO * train_std) & (in_std * MATCH_RATIO >= train_std))[seen].all())
        shift = ((out_mean - train_mean).abs() / train_std.clamp_min(1e-30)).masked_fill(~seen, 0)
        ratio = (out_std / train_std.clamp_min(1e-30)).masked_fill(~seen, 1)
        off = (shift >= SHIFT) | (ratio >= RATIO) | (ratio <= 1 / RATIO)
        if not matched:
            return   # raw inputs given at prediction time: what the transform is for
        t.matched += 1
        if bool(off.any()):
            t.hits += 1
            if t.step is None:
                k = int(torch.where(off, shift + ratio.clamp_min(1e-30).log().abs(), torch.zeros_like(shift)).argmax())
                t.step = self.session.step
                t.worst = (k, float(out_mean[k]), float(out_std[k]), float(train_mean[k]), float(train_std[k]))

    def findings(self) -> list:
        out = self._transform_findings()
        scales_itself = {t.owner for t in self.transforms.values() if t.identity and t.moved}
        for key, m in self.models.items():
            if len(m.eval) < MIN_EVAL or key in scales_itself:
                continue
            if m.computed:   # each evaluation call against the training calls just before it
                train = m.windows
                if len(train) != len(m.eval):
                    continue   # evaluation calls seen before its training inputs were computed: not paired
            else:
                train = m.train
                if len(train) < MIN_TRAIN:
                    continue
            train_mean, train_std = (sum(v) / len(train) for v in zip(*train))
            eval_mean, eval_std = (sum(v) / len(m.eval) for v in zip(*m.eval))
            if train_std <= 0:
                continue
            ratio, shift = eval_std / train_std, abs(eval_mean - train_mean) / train_std
            if 1 / RATIO < ratio < RATIO and shift < SHIFT:
                continue
            calls = (f"{len(m.eval)} calls, each against the training calls just before it" if m.computed
                     else f"{len(m.eval)} and {len(m.train)} calls")
            message = (f"{m.name} is evaluated on inputs with mean {eval_mean:.3g} and standard deviation "
                       f"{eval_std:.3g}, against {train_mean:.3g} and {train_std:.3g} in training ({calls}; spread "
                       f"ratio {ratio:.2g}, shift {shift:.2g} training standard deviations): a preprocessing step "
                       f"(Normalize, a fitted scaler, a division by 255) is "
                       f"applied to one split and not the other. Build both splits' inputs through the same "
                       f"transform, with the statistics fitted on the training split")
            out.append(self.finding(message, step=m.eval_step, evidence={
                "model": m.name, "train_mean": train_mean, "train_std": train_std, "eval_mean": eval_mean,
                "eval_std": eval_std, "std_ratio": ratio, "shift": shift,
                "train_calls": len(m.train), "eval_calls": len(m.eval)}))
        return out

    def _transform_findings(self) -> list:
        out = []
        for t in self.transforms.values():
            if not t.identity or not t.moved or t.hits < MIN_EVAL or t.hits < t.matched or t.worst is None:
                continue
            k, eval_mean, eval_std, train_mean, train_std = t.worst
            message = (f"{t.name} inside {t.model} passes the model's input through unchanged in training mode and "
                       f"transforms it in eval mode; on {t.hits} of {t.hits} eval-mode calls from step {t.step} the "
                       f"input it received already matched what it passed through in training (every feature's "
                       f"mean and spread), and it moved it off (feature {k}: mean {eval_mean:.3g} and standard "
                       f"deviation {eval_std:.3g} against {train_mean:.3g} and {train_std:.3g} in training): "
                       f"evaluation data already transformed by the dataset is transformed a second time, and the "
                       f"layers after it see features on another scale than they were trained on. Put the transform "
                       f"in its training behaviour when the data is already transformed, or give it raw inputs")
            out.append(self.finding(message, step=t.step, evidence={
                "transform": t.name, "model": t.model, "eval_calls": t.hits, "feature": k, "eval_mean": eval_mean,
                "eval_std": eval_std, "train_mean": train_mean, "train_std": train_std}))
        return out
