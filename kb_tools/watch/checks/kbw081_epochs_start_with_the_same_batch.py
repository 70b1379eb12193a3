"""KBW081: a training DataLoader that starts every epoch with the same batch (train-shuffle-off).

Criterion: a DataLoader whose batches feed the optimizer (the last batch drawn before a step of
the primary optimizer came from it), with at least 2 batches per pass, a map-style dataset (an
IterableDataset cannot be shuffled by the loader) and a sampler that is not a DistributedSampler
(KBW020 covers that one), starts a pass, drawn with grad enabled, with a first batch of the same
fingerprint (shape, dtype, sum and strided elements of the first tensor) as the pass before it,
which yielded at least 2 batches (a loader restarted at every step is KBW017's). A shuffled loader
opens each epoch with a new random batch; the same opening batch is the same order every epoch:
shuffle left at its default False, or a sampler that returns its indices in order. Not reported
when a recurrent layer (RNN, LSTM, GRU) is called in training with a hidden state passed in: a
model that carries state from one batch to the next (truncated backpropagation through time) needs
the batches in order (a seq2seq decoder given its encoder's state is silenced too, and is then
left to the other checks).
"""
from __future__ import annotations

import weakref

import torch
from torch.utils.data import IterableDataset
from torch.utils.data.distributed import DistributedSampler

from kb_tools.watch.checks import Check, created_at
from kb_tools.watch.checks.tensors import first_tensor, fingerprint

MAX_LOADERS = 16


class _Passes:
    __slots__ = ("loader", "serial", "first", "passes", "repeats", "step", "length", "sampler", "batches")

    def __init__(self, loader):
        self.loader = weakref.ref(loader)
        self.length = _batches_per_pass(loader)
        self.sampler = type(getattr(loader, "sampler", None)).__name__
        self.serial = None
        self.first = None      # the fingerprint of the opening batch of the latest pass
        self.passes = self.repeats = self.batches = 0  # batches: of the latest pass
        self.step = None


class EpochsStartWithTheSameBatch(Check):
    __doc__ = __doc__
    code = "KBW081"
    name = "epochs-start-with-the-same-batch"
    entry = "train-shuffle-off"
    title = "a training DataLoader opens two epochs with the same batch: it is not shuffled"
    confidence = 0.45  # an unshuffled loader slows and biases training but seldom stops it: other causes first

    def __init__(self, session):
        super().__init__(session)
        self.loaders: dict = {}       # id(loader) -> _Passes
        self.training: set = set()    # ids of loaders whose batches fed an optimizer step
        self.stateful = False         # a recurrent layer was given a hidden state in training

    def on_any_step_pre(self, optimizer):
        loader = self.session.last_batch_loader()
        if loader is not None:
            self.training.add(id(loader))

    def on_module_input(self, module, args):
        if not self.stateful and isinstance(module, torch.nn.RNNBase) and len(args) > 1 and args[1] is not None \
                and torch.is_grad_enabled():
            self.stateful = True

    def on_any_batch(self, loader, batch, serial):
        passes = self.loaders.get(id(loader))
        if passes is None or passes.loader() is not loader:
            if len(self.loaders) >= MAX_LOADERS or isinstance(getattr(loader, "sampler", None), DistributedSampler) \
                    or isinstance(getattr(loader, "dataset", None), IterableDataset):
                return
            passes = self.loaders[id(loader)] = _Passes(loader)
        if serial == passes.serial:
            passes.batches += 1
            return
        if serial is None or not torch.is_grad_enabled():
            return
        previous_batches, passes.serial, passes.batches = passes.batches, serial, 1
        tensor = first_tensor(batch)
        if tensor is None:
            return
        opening = fingerprint(tensor)
        if opening is not None and opening == passes.first and previous_batches >= 2:
            passes.repeats += 1
            if passes.step is None:
                passes.step = self.session.step
        passes.first = opening
        passes.passes += 1

    def findings(self) -> list:
        out: list = []
        if self.stateful:
            return out
        for key, passes in self.loaders.items():
            if not passes.repeats or key not in self.training or passes.length < 2:
                continue
            site = self.session.loaders.get(key)
            where = created_at("DataLoader", site.site if site else None)
            out.append(self.finding(
                f"the training DataLoader ({where}) opened {passes.repeats + 1} of its {passes.passes} passes with "
                f"the same batch (first at step {passes.step}): it yields its samples in the same order every epoch "
                f"(shuffle is off, the default, or its sampler returns indices in order), so every epoch repeats "
                f"the same sequence of gradient steps; pass shuffle=True, unless the model carries state from one "
                f"batch to the next (truncated backpropagation through time) and needs that order",
                where=site.site if site else None, step=passes.step,
                evidence={"passes": passes.passes, "repeats": passes.repeats, "sampler": passes.sampler}))
        return out


def _batches_per_pass(loader) -> int:
    try:
        return len(loader)
    except TypeError:  # an iterable dataset without a length
        return 2
