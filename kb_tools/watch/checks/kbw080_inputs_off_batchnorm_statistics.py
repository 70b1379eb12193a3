"""KBW080: inputs that reach a model's first BatchNorm far off the statistics it applies
(normalization-mismatch).

The first BatchNorm layer that a sampled forward pass of a model reaches (up to 4 models) is
watched while it runs in eval mode on running statistics learned from data: num_batches_tracked
at least 20, or, for statistics loaded or set without the counter, a running_var that is not
torch's initial all-ones. Those are statistics of a pretraining, or of this run's own training,
and eval mode applies them as they are. On its first 3 such calls the input is measured per
channel in those statistics' units, E[((x - running_mean) / sqrt(running_var + eps))^2], and the
median over channels taken. Criterion: at least 100 on all 3 calls, i.e. inputs 10 or more
standard deviations off the scale the layer was fitted to (raw 0-255 pixels or raw sensor
counts fed to a backbone fitted to normalized inputs give thousands; inputs normalized the same
way give about 1, and a new domain through the same normalization rarely more than 10).
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check

CALLS = 3
THRESHOLD = 100.0
MIN_TRACKED = 20
MAX_MODELS = 4


class InputsOffBatchNormStatistics(Check):
    __doc__ = __doc__
    code = "KBW080"
    name = "inputs-off-batchnorm-statistics"
    entry = "normalization-mismatch"
    title = "a model's first BatchNorm, in eval mode on learned statistics, gets inputs 10+ standard deviations off them"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.first: dict = {}   # id(root model) -> id(its first BatchNorm)
        self.measured: dict = {}  # id(that BatchNorm) -> [calls, lowest median, highest median, first step, name]

    def on_module_input(self, module, args):
        if not isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            return
        root = self.session.module_root.get(id(module))
        if root is None:
            return
        first = self.first.get(root)
        if first is None:
            if len(self.first) >= MAX_MODELS:
                return
            first = self.first[root] = id(module)
        if first != id(module) or module.training or not _learned(module):
            return
        name = f"{self.session.module_name(module)} ({type(module).__name__})"
        state = self.measured.setdefault(id(module), [0, float("inf"), 0.0, None, name])
        x = args[0] if args else None
        if state[0] >= CALLS or not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() < 2 \
                or x.shape[1] != module.running_mean.numel():
            return
        median = _median_square_in_units(x.detach(), module)
        if median != median or median == float("inf"):  # non-finite inputs are KBW006's
            return
        state[0] += 1
        state[1], state[2] = min(state[1], median), max(state[2], median)
        if state[3] is None:
            state[3] = self.session.step

    def findings(self) -> list:
        out = []
        for calls, lowest, highest, step, name in self.measured.values():
            if calls >= CALLS and lowest >= THRESHOLD:
                out.append(self.finding(
                    f"{name}, the first BatchNorm of its model, ran in eval mode on running statistics learned "
                    f"from data, and on its first {calls} calls from step {step} its inputs were "
                    f"{lowest ** 0.5:.3g}-{highest ** 0.5:.3g} standard deviations (root mean square per channel, "
                    f"median over channels) off those statistics: the inputs are not prepared the way the data "
                    f"the model was fitted to was (raw pixels or sensor units where it expects normalized ones, "
                    f"another mean/std); apply the preprocessing its training or pretraining used",
                    step=step, evidence={"layer": name, "calls": calls, "median_square_low": round(lowest, 4),
                                         "median_square_high": round(highest, 4)}))
        return out


def _learned(module) -> bool:
    """Running statistics that came from data, not torch's initial mean 0 / var 1."""
    if module.running_var is None or module.running_mean is None:
        return False
    tracked = module.num_batches_tracked
    if tracked is not None and int(tracked) > 0:
        return int(tracked) >= MIN_TRACKED
    return not bool((module.running_var == 1).all())


def _median_square_in_units(x: torch.Tensor, module) -> float:
    """Per channel, the mean of ((x - running_mean) / sqrt(running_var + eps))^2; their median."""
    channels = x.shape[1]
    flat = x.float().transpose(0, 1).reshape(channels, -1)
    mean = module.running_mean.float().view(channels, 1)
    std = (module.running_var.float() + module.eps).sqrt().view(channels, 1)
    return float((((flat - mean) / std) ** 2).mean(dim=1).median())
