"""KBW062: parameters of a DistributedDataParallel model that require grad get no gradient in backward.

Criterion: after a sampled backward() that gave gradients to some parameters of a watched
DistributedDataParallel model, some other parameters of it that require grad still have none,
and the same ones on every such backward seen: at least 1 when the model was built with
find_unused_parameters=False (DDP raises "Expected to have finished reduction" at the next
forward, naming only their indices), at least MIN_BACKWARDS with find_unused_parameters=True
(the run goes on, and those parameters never train). A parameter that gets a gradient on any of
those steps, or whose values change between them (a branch taken on unsampled steps only, as a
task head picked at random per step), is not reported; frozen ones are not read.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, names, plural
from kb_tools.watch.checks.tensors import value_fingerprint

MIN_BACKWARDS = 3
MAX_TRACKED = 64


class _Model:
    __slots__ = ("backwards", "without", "find_unused", "step", "values")

    def __init__(self, find_unused: bool):
        self.backwards, self.without, self.find_unused, self.step = 0, None, find_unused, None
        self.values: dict = {}  # name -> (parameter, its values' fingerprint when first seen without a gradient)


class DdpParametersWithoutGradient(Check):
    __doc__ = __doc__
    code = "KBW062"
    name = "ddp-parameters-without-gradient"
    entry = "ddp-unused-parameters"
    title = "parameters of a DDP model that require grad get no gradient: DDP's reduction cannot finish"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.models: dict[int, _Model] = {}

    def on_after_backward(self, tensors):
        from torch.nn.parallel import DistributedDataParallel
        for info in self.session.models:
            ddp = info.module
            if not isinstance(ddp, DistributedDataParallel):
                continue
            trainable = [(n, p) for n, p in ddp.module.named_parameters() if p.requires_grad]
            if not any(p.grad is not None for _, p in trainable):
                continue  # this backward did not reach the model (another network's step)
            without = {n for n, p in trainable if p.grad is None}
            state = self.models.get(id(ddp))
            if state is None:
                state = self.models[id(ddp)] = _Model(bool(getattr(ddp, "find_unused_parameters", False)))
            state.backwards += 1
            state.without = without if state.without is None else state.without & without
            if state.step is None and without:
                state.step = self.session.step
            by_name = dict(trainable)
            for name in [n for n in state.values if n not in state.without]:
                del state.values[name]  # it got a gradient: nothing to confirm
            for name in sorted(state.without):
                if name not in state.values and len(state.values) < MAX_TRACKED:
                    state.values[name] = (by_name[name], value_fingerprint(by_name[name]))
            self._drop_trained(state)

    @staticmethod
    def _drop_trained(state: _Model) -> None:
        """Parameters whose values changed since they were first seen without a gradient trained on
        some unsampled step: they are not unused."""
        for name, (p, then) in list(state.values.items()):
            if value_fingerprint(p) != then:
                if state.without is not None:
                    state.without.discard(name)
                del state.values[name]

    def on_end(self):
        for state in self.models.values():
            self._drop_trained(state)
            state.values.clear()  # hold no parameter past the run

    def findings(self) -> list:
        out = []
        for state in self.models.values():
            if not state.without or state.backwards < (MIN_BACKWARDS if state.find_unused else 1):
                continue
            listed = sorted(state.without)
            consequence = ("with find_unused_parameters=True the run goes on, but they never train"
                           if state.find_unused else
                           "with find_unused_parameters=False DDP waits for their gradients and the next "
                           "forward raises \"Expected to have finished reduction\"")
            seen = (f"in the backward pass of step {state.step}" if state.backwards == 1 else
                    f"in every one of {state.backwards} sampled backward passes from step {state.step}")
            message = (f"{plural(len(listed), 'parameter')} of the DistributedDataParallel model "
                       f"({names(listed)}) required grad but got none {seen}: {consequence}; make the loss use "
                       f"them, or set requires_grad=False on them (or remove them) before wrapping the model")
            out.append(self.finding(message, where=self.session.where(), step=state.step, evidence={
                "parameters": listed[:50], "count": len(listed), "backwards": state.backwards,
                "find_unused_parameters": state.find_unused}))
        return out
