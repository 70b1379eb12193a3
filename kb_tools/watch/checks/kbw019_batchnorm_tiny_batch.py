"""KBW019: a BatchNorm layer trained on batches of one or two samples.

Criterion: a BatchNorm layer in training mode, called with grad enabled, received a batch of at
most 2 samples (the first dimension of its input) on at least 3 sampled forward passes and on
at least half of its sampled training forward passes, so a short last batch of an epoch does
not count. With 1 or 2 samples the batch statistics are dominated by the samples themselves
(with 2, each feature is mapped to about +-1 whatever its value) and the running statistics used
in evaluation do not match what training normalized with; gradient accumulation does not
change that. SyncBatchNorm with an initialized process group is not reported.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, names, plural

MAX_BATCH = 2
MIN_FORWARDS = 3
SHARE = 0.5
MAX_LAYERS = 256


class BatchNormTinyBatch(Check):
    __doc__ = __doc__
    code = "KBW019"
    name = "batchnorm-tiny-batch"
    entry = "batchnorm-tiny-batch"
    title = "BatchNorm layers in training mode normalizing batches of 1 or 2 samples"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.layers: dict = {}  # id(module) -> [name, class, forwards, tiny forwards, first tiny step, smallest batch, site]

    def on_module_forward(self, module, output, grad_enabled):
        if not grad_enabled or not isinstance(module, torch.nn.modules.batchnorm._BatchNorm) or not module.training:
            return
        if isinstance(module, torch.nn.SyncBatchNorm) and torch.distributed.is_available() \
                and torch.distributed.is_initialized():
            return
        if not isinstance(output, torch.Tensor) or output.dim() < 2:
            return
        st = self.layers.get(id(module))
        if st is None:
            if len(self.layers) >= MAX_LAYERS:
                return
            st = self.layers[id(module)] = [self.session.module_name(module), type(module).__name__, 0, 0, None, None,
                                                 self.session.module_sites.get(module)]
        st[2] += 1
        batch = output.shape[0]
        if batch <= MAX_BATCH:
            st[3] += 1
            st[5] = batch if st[5] is None else min(st[5], batch)
            if st[4] is None:
                st[4] = self.session.step

    def findings(self) -> list:
        hit = [st for st in self.layers.values() if st[3] >= MIN_FORWARDS and st[3] >= SHARE * st[2]]
        if not hit:
            return []
        first = min(hit, key=lambda st: st[4])
        name, cls, forwards, tiny, step, smallest, site = first
        layers = [f"{st[0]} ({st[1]})" for st in hit]
        size = smallest if smallest == MAX_BATCH else f"1-{MAX_BATCH}"
        created = f" (created at {site})" if site else ""
        message = (f"{plural(len(layers), 'BatchNorm layer')} ({names(layers, 3)}) normalized batches of {size} "
                   f"samples in training mode: {name}{created} on {tiny} of {forwards} sampled training forwards "
                   f"from step {step}; the statistics of 1-2 samples are mostly the samples themselves: use "
                   f"GroupNorm or LayerNorm, or more samples per forward (gradient accumulation does not help)")
        return [self.finding(message, where=site, step=step, evidence={
            "layers": [st[0] for st in hit][:20], "tiny_forwards": tiny, "forwards": forwards,
            "smallest_batch": smallest})]
