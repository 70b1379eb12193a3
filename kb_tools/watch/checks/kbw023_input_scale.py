"""KBW023: a convolutional first layer trained on raw-scale inputs (unnormalized-inputs), a first layer
evaluated on another scale than trained, or fed inputs the same for every sample (normalization-mismatch).

The first layer is the first leaf module holding parameters to start in a sampled forward pass
of a model (up to 4 models); a normalization layer there (BatchNorm, LayerNorm, GroupNorm,
InstanceNorm) or an embedding ends the check for that model. The first 3 float inputs it
receives on sampled steps with grad enabled (training) and the first 3 without (evaluation) are
measured: their mean and standard deviation over the whole tensor, and scale = max(|mean|, std).
Criterion, raw-scale training inputs: the first layer is a convolution and on all of the first 3
training batches the scale is at least 10 (raw 0-255 pixels give about 110-130, raw 16-bit
audio thousands; standardized inputs about 1, [0, 1] pixels 0.5). Tabular inputs in raw units
are not judged this way: a model may be meant to take them as they are.
Criterion, evaluation on another scale: every measured input of the first layer was the model's
own input (the tensor passed to the model, or a view of it: a layer deeper in the graph sees
features that another prediction path may scale differently), the training scale stayed at most
3 on those batches while on at least 2 evaluation batches it was at least 10 times the largest
training scale, or at most a tenth of the smallest (a transform applied in one path and not the
other).
Criterion, inputs the same for every sample: on every measured call of the first layer (at least 2,
training and evaluation together, each a batch of at least 8 samples along the first axis), the
spread between samples (the standard deviation across the batch of each input value, averaged over
the values) is at most 1e-3 of the inputs' root mean square, while that root mean square is at most
10 (inputs that look standardized). A unit conversion applied before a z-score with statistics in
the original units gives about 3e-5 (every value near the same constant, the content in the fourth
decimal); standardized features, normalized images and reset states of simulated environments give
1e-2 to 1. Batches of identical samples (spread below 1e-6 of the root mean square: a repeated
condition, one diffusion timestep for the whole batch, a dummy input) are not measured.
"""
from __future__ import annotations

import math

import torch

from kb_tools.watch.checks import Check

BATCHES = 3
RAW = 10.0
UNIT = 3.0
FACTOR = 10.0
MAX_MODELS = 4
MIN_SAMPLES = 8
FLAT = 1e-3       # spread between samples, as a share of the root mean square, at or below which inputs are the same
IDENTICAL = 1e-6  # below this share the samples are copies of one another and the call is not measured
FLAT_RMS = 10.0
MIN_FLAT_CALLS = 2
_NORMS = (torch.nn.modules.batchnorm._BatchNorm, torch.nn.LayerNorm, torch.nn.GroupNorm,
          torch.nn.modules.instancenorm._InstanceNorm)
_EMBEDDINGS = (torch.nn.Embedding, torch.nn.EmbeddingBag)


class _Layer:
    __slots__ = ("name", "cls", "site", "conv", "stats", "indirect", "flat")

    def __init__(self, name, cls, site, module):
        self.name, self.cls, self.site = name, cls, site
        self.conv = isinstance(module, torch.nn.modules.conv._ConvNd)
        # per path (True: training, False: evaluation): [count, low scale, high scale, mean, std, first step]
        self.stats = {True: [0, float("inf"), 0.0, None, None, None], False: [0, float("inf"), 0.0, None, None, None]}
        self.indirect = False  # some measured input was not the model's own input
        # batches of MIN_SAMPLES or more: [measured, highest spread share, highest rms, lowest rms, first step]
        self.flat = [0, 0.0, 0.0, float("inf"), None]


class InputScale(Check):
    __doc__ = __doc__
    code = "KBW023"
    name = "input-scale"
    entry = "unnormalized-inputs"
    also = ("normalization-mismatch",)
    title = ("raw-scale inputs (0-255 pixels) into a first convolution, first-layer inputs on another scale in evaluation, "
             "or first-layer inputs nearly the same for every sample")
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.expect = None            # the model whose first layer is being looked for
        self.resolved: set = set()    # ids of ModelInfo whose first layer is known
        self.layers: dict = {}        # id(first layer) -> _Layer, at most MAX_MODELS
        self.model_inputs: dict = {}  # id(watched model) -> storages of the float tensors of its last call

    def on_root_forward(self, model, grad_enabled):
        if self.expect is None and len(self.resolved) < MAX_MODELS and id(model) not in self.resolved:
            self.expect = model

    def on_module_input(self, module, args):
        if self.session.is_model(module) and (id(module) in self.model_inputs or len(self.model_inputs) < MAX_MODELS):
            self.model_inputs[id(module)] = {_storage(a) for a in args
                                             if isinstance(a, torch.Tensor) and a.is_floating_point()}
        layer = self.layers.get(id(module))
        if layer is None:
            info = self.expect
            if info is None or next(module.children(), None) is not None \
                    or next(module.parameters(recurse=False), None) is None:
                return
            self.expect = None
            self.resolved.add(id(info))
            if isinstance(module, _NORMS + _EMBEDDINGS):
                return
            layer = self.layers[id(module)] = _Layer(self.session.module_name(module), type(module).__name__,
                                                     self.session.module_sites.get(module), module)
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() < 2:
            return
        st = layer.stats[torch.is_grad_enabled()]
        if st[0] >= BATCHES:
            return
        x = x.detach().float()
        if x.dim() >= 2 and x.shape[0] >= MIN_SAMPLES:
            mean, std, spread, rms = torch.stack([x.mean(), x.std(), x.std(0).mean(), x.square().mean().sqrt()]).tolist()
            _flat(layer.flat, spread, rms, self.session.step)
        else:
            mean, std = torch.stack([x.mean(), x.std()]).tolist()
        scale = max(abs(mean), std)
        st[0] += 1
        st[1], st[2] = min(st[1], scale), max(st[2], scale)
        root = self.session.module_root.get(id(module))
        if _storage(x) not in self.model_inputs.get(root, ()):
            layer.indirect = True
        if st[3] is None:
            st[3], st[4], st[5] = mean, std, self.session.step

    def findings(self) -> list:
        out = []
        for layer in self.layers.values():
            train, evaluation = layer.stats[True], layer.stats[False]
            where = f"{layer.name} ({layer.cls}{f', created at {layer.site}' if layer.site else ''})"
            if layer.conv and train[0] >= BATCHES and train[1] >= RAW:
                message = (f"the first layer {where} received training inputs with mean {train[3]:.4g} and std "
                           f"{train[4]:.4g} at step {train[5]}, and a scale (max of |mean| and std) of "
                           f"{train[1]:.4g}-{train[2]:.4g} on its first {train[0]} training batches, far from the "
                           f"O(1) scale of standardized inputs: normalize the inputs (e.g. divide raw pixels by "
                           f"255 and standardize with the training set's mean and std)")
                out.append(self.finding(message, where=layer.site, step=train[5], evidence={
                    "layer": layer.name, "mean": train[3], "std": train[4], "lowest_scale": train[1],
                    "highest_scale": train[2], "batches": train[0]}))
            elif not layer.indirect and train[0] >= BATCHES and train[2] <= UNIT and evaluation[0] >= 2 and train[1] > 0 and \
                    (evaluation[1] >= FACTOR * train[2] or evaluation[2] <= train[1] / FACTOR):
                message = (f"the first layer {where} received evaluation inputs (grad disabled) with mean "
                           f"{evaluation[3]:.4g} and std {evaluation[4]:.4g} at step {evaluation[5]}, a scale of "
                           f"{evaluation[1]:.4g}-{evaluation[2]:.4g} against {train[1]:.4g}-{train[2]:.4g} in "
                           f"training: the evaluation path prepares its inputs differently; use the same transform "
                           f"in both")
                out.append(self.finding(message, where=layer.site, step=evaluation[5], confidence=0.85,
                                        entry="normalization-mismatch", evidence={
                    "layer": layer.name, "train_scale": [train[1], train[2]],
                    "eval_scale": [evaluation[1], evaluation[2]], "eval_mean": evaluation[3],
                    "eval_std": evaluation[4]}))
            flat = layer.flat
            if flat[0] >= MIN_FLAT_CALLS and flat[1] <= FLAT and flat[2] <= FLAT_RMS:
                message = (f"the first layer {where} received inputs that are nearly the same for every sample: on "
                           f"{flat[0]} calls from step {flat[4]} the spread between the samples of a batch was at most "
                           f"{flat[1]:.2g} of the inputs' root mean square ({flat[3]:.3g}-{flat[2]:.3g}), so the "
                           f"content sits in the last digits of a near-constant value and the model cannot tell its "
                           f"inputs apart: the preprocessing does not match the data (a unit conversion before a "
                           f"z-score with statistics in the original units, a mean and std of another unit or "
                           f"dataset); print a few samples of the tensor passed to the model and compare them")
                out.append(self.finding(message, where=layer.site, step=flat[4], confidence=0.55,
                                        entry="normalization-mismatch", evidence={
                    "layer": layer.name, "calls": flat[0], "spread_share": flat[1], "rms": [flat[3], flat[2]]}))
        return out


def _flat(flat: list, spread: float, rms: float, step: int) -> None:
    """Record one batch's spread between samples as a share of its root mean square (copies of one
    sample, or an all-zero or non-finite batch, are not measured)."""
    if not (rms > 0 and math.isfinite(rms) and math.isfinite(spread)) or spread <= IDENTICAL * rms:
        return
    flat[0] += 1
    flat[1], flat[2], flat[3] = max(flat[1], spread / rms), max(flat[2], rms), min(flat[3], rms)
    if flat[4] is None:
        flat[4] = step


def _storage(t: torch.Tensor) -> int:
    """The address of the memory `t` views: equal for a tensor and its views, reshapes and slices."""
    try:
        return t.untyped_storage().data_ptr()
    except RuntimeError:  # a tensor without storage (sparse, some subclasses)
        return -1
