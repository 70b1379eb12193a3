"""KBW020: a shuffling DistributedSampler whose set_epoch() is not called between epochs.

Criterion: a DataLoader whose sampler is a DistributedSampler with shuffle=True has yielded more
batches than one pass holds (len(loader)), so a second pass has begun, and on a sampled batch
of that later pass the sampler's epoch is still the value it had on a batch of the first pass.
The sampler seeds its permutation with seed + epoch, so without set_epoch(epoch) (or with the
same value every time) every epoch repeats the first epoch's order and batch composition.
"""
from __future__ import annotations

import weakref

from torch.utils.data.distributed import DistributedSampler

from kb_tools.watch.checks import Check, created_at

MAX_LOADERS = 32


class SamplerSetEpochMissing(Check):
    __doc__ = __doc__
    code = "KBW020"
    name = "sampler-set-epoch-missing"
    entry = "distributed-sampler-set-epoch"
    title = "a shuffling DistributedSampler still at its first epoch in a later pass: set_epoch() not called"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        # id(loader) -> [weakref, epoch seen in the first pass, per pass, site, found (step, batches, epoch) or None]
        self.loaders: dict = {}

    def on_batch(self, loader, batch):
        sampler = getattr(loader, "sampler", None)
        if sampler is None or not isinstance(sampler, DistributedSampler) or not sampler.shuffle:
            return
        info = self.session.loaders.get(id(loader))
        if info is None:  # created before watching began: its earlier batches were not counted
            return
        st = self.loaders.get(id(loader))
        if st is not None and st[0]() is not loader:
            st = None
        if st is None:
            if len(self.loaders) >= MAX_LOADERS:
                return
            try:
                per_pass = len(loader)
            except TypeError:
                return
            if info.batches > per_pass or per_pass < 1:
                return  # first seen after its first pass: nothing to compare with
            st = self.loaders[id(loader)] = [weakref.ref(loader), sampler.epoch, per_pass, info.site, None]
            return
        if st[4] is None and info.batches > st[2] and sampler.epoch == st[1]:
            st[4] = (self.session.step, info.batches, sampler.epoch)

    def findings(self) -> list:
        out = []
        for _, epoch, per_pass, site, found in self.loaders.values():
            if found is None:
                continue
            step, batches, _ = found
            message = (f"the DistributedSampler (shuffle=True) of the DataLoader ({created_at('loader', site)}) was "
                       f"still at epoch {epoch} at step {step}, in its pass {(batches - 1) // per_pass + 1} "
                       f"(batch {batches}, {per_pass} per pass): the order of the first pass is repeated; call "
                       f"sampler.set_epoch(epoch) on the loader's own sampler before each epoch")
            out.append(self.finding(message, where=site, step=step, evidence={
                "epoch": epoch, "batches": batches, "batches_per_pass": per_pass}))
        return out
