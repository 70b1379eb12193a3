"""KBW042: a "frozen" BatchNorm layer left in training mode, so its running statistics keep moving.

Criterion: a BatchNorm layer that tracks running statistics, whose affine weight and bias exist and
never required grad on any sampled forward, ran in training mode on at least 3 sampled forwards
with grad enabled while an optimizer was stepping other parameters (the run had taken at least one
optimizer step by then). requires_grad=False stops its weight and bias, not its running_mean and
running_var: every training-mode forward pulls them toward the new batches (momentum 0.1), so the
"frozen" backbone's features drift. A layer whose weight requires grad on any sampled forward (a GAN
discriminator frozen only during the generator's steps) is not reported.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, names, plural

MIN_FORWARDS = 3
MAX_LAYERS = 256


class FrozenBatchNormStats(Check):
    __doc__ = __doc__
    code = "KBW042"
    name = "frozen-batchnorm-stats"
    entry = "frozen-batchnorm-stats"
    title = "BatchNorm layers frozen with requires_grad=False but left in training mode"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        # id(module) -> [name, class, frozen training forwards, first step, site, ever trainable]
        self.layers: dict = {}

    def on_module_forward(self, module, output, grad_enabled):
        if not grad_enabled or not isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            return
        if not (module.training and module.track_running_stats and module.affine):
            return
        st = self.layers.get(id(module))
        if st is None:
            if len(self.layers) >= MAX_LAYERS:
                return
            st = self.layers[id(module)] = [self.session.module_name(module), type(module).__name__, 0, None,
                                            self.session.module_sites.get(module), False]
        if module.weight.requires_grad or module.bias.requires_grad:
            st[5] = True
            return
        if self.session.step < 1:
            return
        st[2] += 1
        if st[3] is None:
            st[3] = self.session.step

    def findings(self) -> list:
        hit = [st for st in self.layers.values() if not st[5] and st[2] >= MIN_FORWARDS]
        if not hit:
            return []
        first = min(hit, key=lambda st: st[3])
        name, cls, forwards, step, site, _ = first
        layers = [f"{st[0]} ({st[1]})" for st in hit]
        created = f" (created at {site})" if site else ""
        message = (f"{plural(len(layers), 'BatchNorm layer')} with requires_grad=False ({names(layers, 3)}) "
                   f"ran in training mode while the optimizer stepped: {name}{created} on {forwards} sampled "
                   f"forwards from step {step}; requires_grad=False freezes the weight and bias, not "
                   f"running_mean and running_var, which every training-mode forward overwrites: put the "
                   f"frozen part in eval() after each model.train()")
        return [self.finding(message, where=site, step=step, evidence={
            "layers": [st[0] for st in hit][:20], "frozen_training_forwards": forwards})]
