"""KBW042: a "frozen" BatchNorm layer left in training mode, so its running statistics keep moving.

Criterion: a BatchNorm layer that tracks running statistics and has an affine weight and bias is
frozen in one of two ways: its weight and bias never required grad on any sampled forward, or it
ran only under no_grad (a frozen estimator run for its outputs inside a model call made with grad
enabled), so no gradient ever reaches it. It ran in training mode on at least 3 sampled forwards of
a training pass (grad enabled, or that no_grad block inside a grad-enabled model call) while an
optimizer was stepping other parameters (the run had taken at least one optimizer step by then).
Neither requires_grad=False nor no_grad stops running_mean and running_var: every training-mode
forward pulls them toward the new batches (momentum 0.1), so the "frozen" part's features drift.
A layer whose weight requires grad on a forward with grad enabled (a GAN discriminator frozen only
during the generator's steps) is not reported, nor is a model called as a whole under no_grad (an
evaluation, KBW012's case), nor a layer whose weight changes during the run (a momentum encoder or
EMA teacher, updated without gradients, whose batch statistics are part of the method).
"""
from __future__ import annotations

import weakref

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
        # id(module) -> [name, class, frozen training forwards, first step, site, requires grad seen,
        #                ran with grad enabled, (weak reference, weight when first counted), weight changed]
        self.layers: dict = {}
        self.training_pass = False  # the latest call of a watched model was made with grad enabled

    def on_root_forward(self, model, grad_enabled):
        self.training_pass = grad_enabled

    def on_module_forward(self, module, output, grad_enabled):
        if not (grad_enabled or self.training_pass) or not isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            return
        if not (module.training and module.track_running_stats and module.affine):
            return
        st = self.layers.get(id(module))
        if st is None:
            if len(self.layers) >= MAX_LAYERS:
                return
            st = self.layers[id(module)] = [self.session.module_name(module), type(module).__name__, 0, None,
                                            self.session.module_sites.get(module), False, False, None, False]
        if module.weight.requires_grad or module.bias.requires_grad:
            st[5] = True
        if grad_enabled:
            st[6] = True
        if self.session.step < 1:
            return
        st[2] += 1
        if st[3] is None:
            st[3] = self.session.step
            st[7] = (weakref.ref(module), module.weight.detach().clone())

    def on_end(self):
        for st in self.layers.values():
            module = st[7][0]() if st[7] is not None else None
            if module is not None and not torch.equal(module.weight.detach(), st[7][1]):
                st[8] = True  # updated without gradients: an EMA or momentum copy

    def findings(self) -> list:
        hit = [st for st in self.layers.values() if not (st[5] and st[6]) and not st[8] and st[2] >= MIN_FORWARDS]
        if not hit:
            return []
        first = min(hit, key=lambda st: st[3])
        name, cls, forwards, step, site, *_ = first
        layers = [f"{st[0]} ({st[1]})" for st in hit]
        created = f" (created at {site})" if site else ""
        how = "with requires_grad=False" if not first[5] else "run only under no_grad"
        message = (f"{plural(len(layers), 'BatchNorm layer')} {how} ({names(layers, 3)}) "
                   f"ran in training mode while the optimizer stepped: {name}{created} on {forwards} sampled "
                   f"forwards from step {step}; {'requires_grad=False' if not first[5] else 'no_grad'} freezes "
                   f"the weight and bias, not running_mean and running_var, which every training-mode forward "
                   f"overwrites: put the frozen part in eval() after each model.train()")
        return [self.finding(message, where=site, step=step, evidence={
            "layers": [st[0] for st in hit][:20], "frozen_training_forwards": forwards,
            "frozen_by": "requires_grad=False" if not first[5] else "no_grad"})]
