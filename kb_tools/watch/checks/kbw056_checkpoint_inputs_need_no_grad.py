"""KBW056: a reentrant gradient checkpoint whose inputs need no gradient: the block inside gets none.

Criterion: on at least 2 sampled steps, torch.utils.checkpoint.checkpoint is called with grad
enabled, use_reentrant not False (True, or not passed: torch 2.x's default), no tensor argument
that requires grad, around a module (or a method of one) that holds parameters which require grad.
The reentrant variant runs the block under no_grad and reconnects it to the graph only through its
tensor inputs, so with frozen inputs (a frozen embedding under trainable adapters) the block's
parameters never get a gradient.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, names

MIN_STEPS = 2


def _module_of(function):
    if isinstance(function, torch.nn.Module):
        return function
    owner = getattr(function, "__self__", None)
    if isinstance(owner, torch.nn.Module):
        return owner
    inner = getattr(function, "func", None)  # functools.partial
    return _module_of(inner) if inner is not None and inner is not function else None


class CheckpointInputsNeedNoGrad(Check):
    __doc__ = __doc__
    code = "KBW056"
    name = "checkpoint-inputs-need-no-grad"
    entry = "gradient-checkpointing-no-grad"
    title = "reentrant gradient checkpoints whose inputs need no gradient: the trainable layers inside get none"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.blocks: dict = {}  # module name -> [steps, first step, last step, trainable tensors, site]

    def on_checkpoint(self, function, site):
        module = _module_of(function)
        if module is None:
            return
        trainable = sum(1 for p in module.parameters() if p.requires_grad)
        if not trainable:
            return
        s = self.session
        st = self.blocks.setdefault(s.module_name(module), [0, s.step, None, trainable, site])
        if st[2] != s.step:
            st[0] += 1
            st[2] = s.step

    def findings(self) -> list:
        blocks = {n: st for n, st in self.blocks.items() if st[0] >= MIN_STEPS}
        if not blocks:
            return []
        listed = sorted(blocks)
        first = min(st[1] for st in blocks.values())
        site = next(iter(blocks.values()))[4]
        tensors = sum(st[3] for st in blocks.values())
        message = (f"torch.utils.checkpoint ran {names(listed)} with use_reentrant=True (or not passed) and inputs "
                   f"that need no gradient, from step {first}"
                   f"{f' (called at {site})' if site else ''}: the reentrant checkpoint runs the block under no_grad "
                   f"and connects it only through its inputs, so its {tensors} trainable tensors get no gradient; "
                   f"pass use_reentrant=False (or make the inputs require grad, as "
                   f"enable_input_require_grads() does)")
        return [self.finding(message, where=site, step=first, evidence={
            "blocks": listed[:50], "trainable_tensors": tensors, "first_step": first})]
