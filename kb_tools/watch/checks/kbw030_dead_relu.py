"""KBW030: most units (over 70%) after an nn.ReLU are zero for every example of the batch (dead ReLUs).

Criterion: at an nn.ReLU module's output in a training forward (grad enabled, module in training
mode) over a batch of at least 16 examples, the share of units that are 0 for every example (a
unit is a feature of a 2-d output, a channel of a 3-d or larger one, over all its positions) is
above 0.5 on each of the last 3 or more sampled steps watched, at step 3 or later, up to the end.
A healthy ReLU layer has almost none: a unit alive for a random half of the inputs is zero on
all of 16 examples with probability 2**-16. That holds for inputs of several features; a model
whose input has fewer than MIN_FEATURES values per example (a curve fitted on one x) puts its
examples on a line, where a unit is negative over the whole range by construction, so its ReLUs
are not reported. F.relu calls are not seen, only nn.ReLU modules.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, created_at

DEAD = 0.7
MIN_STEPS = 3
MIN_BATCH = 16
FROM_STEP = 3
MAX_MODULES = 256
MIN_FEATURES = 4


class _State:
    __slots__ = ("name", "site", "step", "share", "units", "run", "first", "worst", "root")

    def __init__(self, name, site):
        self.name, self.site, self.step, self.share, self.units = name, site, None, 0.0, 0
        self.run, self.first, self.worst = 0, None, 0.0  # consecutive sampled steps above DEAD
        self.root = None  # the id of the watched model it belongs to


class DeadRelu(Check):
    __doc__ = __doc__
    code = "KBW030"
    name = "dead-relu"
    entry = "dead-relu"
    title = "more than 70% of an nn.ReLU's units are zero for every example of the batch, step after step"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.states: dict[int, _State] = {}
        self.features: dict[int, int] = {}  # id of a watched model -> fewest input values per example seen

    def on_module_input(self, module, args):
        if not self.session.is_model(module):
            return  # only a watched model's own input
        x = args[0] if args else None
        if isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[0] > 0:
            per_example = x.numel() // x.shape[0] if x.dim() > 1 else 1
            self.features[id(module)] = min(self.features.get(id(module), per_example), per_example)

    def _few_input_features(self, st: _State) -> bool:
        return self.features.get(st.root, MIN_FEATURES) < MIN_FEATURES

    def on_module_forward(self, module, output, grad_enabled):
        if not isinstance(module, torch.nn.ReLU) or not grad_enabled or not module.training:
            return
        if not isinstance(output, torch.Tensor) or output.dim() < 2 or output.shape[0] < MIN_BATCH:
            return
        step = self.session.step
        st = self.states.get(id(module))
        if st is None:
            if len(self.states) >= MAX_MODULES:
                return
            st = self.states[id(module)] = _State(self.session.module_name(module), self.session.module_sites.get(module))
            st.root = self.session.module_root.get(id(module))
        with torch.no_grad():
            out = output.detach()
            # a ReLU's output is never negative, so a unit is dead where its largest value is 0 (a NaN
            # stays alive); one reduction, no batch-sized mask allocated on every sampled step
            largest = out.amax(dim=[d for d in range(out.dim()) if d != 1])
            share = float(largest.eq(0).float().mean())
            units = largest.shape[0]
        if st.step == step:  # the module ran again in this step (a shared ReLU): keep the smallest share
            st.share = min(st.share, share)
            return
        self._close(st)
        st.step, st.share, st.units = step, share, units

    def _close(self, st: _State) -> None:
        """Count the last measured step of `st` into its run of dead steps."""
        if st.step is None or st.step < FROM_STEP:
            return
        if st.share > DEAD:
            st.run += 1
            if st.first is None or st.run == 1:
                st.first = st.step
            st.worst = max(st.worst, st.share)
        else:
            st.run, st.first, st.worst = 0, None, 0.0

    def findings(self) -> list:
        out = []
        for st in self.states.values():
            run, first, worst = st.run, st.first, st.worst
            if st.step is not None and st.step >= FROM_STEP:  # the last step measured, without changing state
                if st.share > DEAD:
                    run, first, worst = run + 1, first if run else st.step, max(worst, st.share)
                else:
                    run = 0
            if run < MIN_STEPS or self._few_input_features(st):
                continue
            where = created_at('nn.ReLU', st.site)
            message = (f"{st.share:.0%} of the {st.units} units of the ReLU '{st.name}' ({where}) were zero for every "
                       f"example of the batch at step {st.step}, and more than {DEAD:.0%} on each of the last "
                       f"{run} sampled steps since step {first} (up to {worst:.0%}): "
                       f"those units pass no gradient and no longer learn")
            out.append(self.finding(message, where=st.site, step=first, evidence={
                "module": st.name, "units": st.units, "dead_share": st.share, "worst_share": worst,
                "sampled_steps_dead": run, "from_step": first, "last_step": st.step}))
        return out
