"""KBW055: a BatchNorm layer whose input is the output of an nn.Dropout (train/eval variance shift).

Criterion: in training forwards (grad enabled, the BatchNorm in training mode with running
statistics) on at least 2 sampled steps, a BatchNorm module receives as its input the very tensor
an nn.Dropout module (p >= 0.1) returned just before. Dropout raises the variance the BatchNorm
records in training and is the identity in evaluation, so evaluation divides by a running
variance that is too large. Dropout placed after the BatchNorm, or before a Linear or Conv, is
not reported; nor is a network fed another network's differentiable output (a GAN's
discriminator on the generator's samples) unless it is also seen running in eval mode: a
discriminator is trained and used in training mode only, where the variance it records is the
one it sees.
"""
from __future__ import annotations

import weakref

import torch
from torch.nn.modules.dropout import _DropoutNd

from kb_tools.watch.checks import Check, names

MIN_STEPS = 2
MIN_P = 0.1
BATCHNORMS = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)


class DropoutIntoBatchnorm(Check):
    __doc__ = __doc__
    code = "KBW055"
    name = "dropout-into-batchnorm"
    entry = "dropout-batchnorm-shift"
    title = "a Dropout whose output goes straight into a BatchNorm: its running variance is too large in eval"
    confidence = 0.7

    def __init__(self, session):
        super().__init__(session)
        # (weak reference to the output, module, p) of the last nn.Dropout output: a weak reference, not
        # its id, since a later tensor can reuse a freed one's id, data pointer and shape
        self.last: tuple | None = None
        self.pairs: dict = {}            # (dropout name, batchnorm name) -> [steps, first step, last step, p, model id]
        self.evaluated: set = set()      # names of BatchNorm layers seen running in eval mode (bounded by the model)
        self.fed: set = set()            # ids of watched models that received an input requiring grad

    def on_module_forward(self, module, output, grad_enabled):
        if isinstance(module, _DropoutNd) and module.training and module.p >= MIN_P and grad_enabled \
                and isinstance(output, torch.Tensor):
            self.last = (weakref.ref(output), module, module.p)

    def on_module_input(self, module, args):
        if not isinstance(module, BATCHNORMS):
            if args and isinstance(args[0], torch.Tensor) and args[0].requires_grad and self.session.is_model(module):
                self.fed.add(id(module))
            return
        if not module.training:
            self.evaluated.add(self.session.module_name(module))
        last, self.last = self.last, None
        if last is None or not module.training or not module.track_running_stats or not torch.is_grad_enabled() \
                or not args:
            return
        x = args[0]
        if not isinstance(x, torch.Tensor) or last[0]() is not x:
            return
        s = self.session
        key = (s.module_name(last[1]), s.module_name(module))
        st = self.pairs.setdefault(key, [0, s.step, None, last[2], s.module_root.get(id(module))])
        if st[2] != s.step:
            st[0] += 1
            st[2] = s.step

    def on_end(self):
        self.last = None

    def findings(self) -> list:
        pairs = {k: v for k, v in self.pairs.items()
                 if v[0] >= MIN_STEPS and (v[4] not in self.fed or k[1] in self.evaluated)}
        if not pairs:
            return []
        listed = [f"{d} (p={v[3]:g}) -> {b}" for (d, b), v in sorted(pairs.items())]
        first = min(v[1] for v in pairs.values())
        message = (f"a Dropout feeds a BatchNorm directly: {names(listed)}, in training forwards on "
                   f"{max(v[0] for v in pairs.values())} sampled steps from step {first}: the BatchNorm records the "
                   f"variance of dropped-out activations, which evaluation (dropout off) no longer has, so it "
                   f"shrinks them there; put the Dropout after the BatchNorm (or before the next Linear/Conv)")
        return [self.finding(message, step=first, evidence={"pairs": listed[:20]})]
