"""KBW108: under DistributedDataParallel with gradient accumulation, the last backward() before a step
ran without gradient synchronisation while an earlier one of the same window synchronised: no_sync()
wraps the wrong micro-batches (ddp-no-sync-accumulation).

Criterion: DDP decides when its forward runs whether the coming backward() all-reduces, from its
`require_backward_grad_sync` attribute (no_sync() sets it to False for the block). That attribute is
read on every grad-enabled call of a watched model that has it (a DistributedDataParallel, or a
wrapper that follows the same contract), one attribute read per call. Each backward() after such a
call is tagged with the flag of the model's latest grad-enabled call. A window is the backward()
calls between two step() calls of an optimizer that holds the model's parameters. A window of at
least 2 backward() calls whose last backward() ran unsynchronised although an earlier one of the
window synchronised is a hit: the all-reduce happened on a middle micro-batch, so every rank steps
with the mean of the early micro-batches plus its own unreduced later ones, and the replicas drift
apart (the flag set after the forward, `model.require_backward_grad_sync = last` placed before
backward(), has this effect; so does a no_sync() test that is off by one). Reported when at least
MIN_HITS windows are hits and they are at least half of the windows of 2 or more backward() calls.
Not judged: windows in which no backward() synchronised (gradients reduced by hand after a no_sync()
block, or local SGD that averages parameters, look the same from one rank), windows of a single
backward(), and the evaluation pass and brief run after --steps.
"""
from __future__ import annotations

import weakref

from kb_tools.watch.checks import Check, created_at, names, plural

FLAG = "require_backward_grad_sync"
MIN_HITS = 3
MIN_SHARE = 0.5
MAX_MODELS = 8


class _Window:
    """One DDP-like model: the flag of its latest grad-enabled call and the backward() calls of the window
    under way."""

    __slots__ = ("ref", "cls", "probe", "pending", "flags", "windows", "hits", "first", "pattern", "optimizer")

    def __init__(self, module, probe):
        self.ref = weakref.ref(module)
        self.cls = type(module).__name__
        self.probe = id(probe)
        self.pending = None        # the flag of the latest grad-enabled call not yet followed by a backward()
        self.flags: list = []      # per backward() of this window: did its forward synchronise
        self.windows = self.hits = 0
        self.first = None          # the step whose window was the first hit
        self.pattern = None        # that window's flags
        self.optimizer = None      # id of the optimizer whose step ended it


class BoundaryBackwardNotSynchronised(Check):
    __doc__ = __doc__
    code = "KBW108"
    name = "boundary-backward-not-synchronised"
    entry = "ddp-no-sync-accumulation"
    title = "the backward() right before a DDP step ran inside no_sync() while an earlier micro-batch synchronised"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.models: dict = {}    # id(model) -> _Window
        self.holds: dict = {}     # (id(optimizer), id(model)) -> does the optimizer hold the model's parameters

    def on_root_input(self, model, args, grad_enabled):
        if not grad_enabled:
            return
        module = model.module
        flag = getattr(module, "__dict__", {}).get(FLAG) if module is not None else None
        if not isinstance(flag, bool):
            return
        w = self.models.get(id(module))
        if w is None or w.ref() is not module:
            if len(self.models) >= MAX_MODELS:
                return
            probe = next((p for p in module.parameters() if p.requires_grad), None)
            if probe is None:
                return
            w = self.models[id(module)] = _Window(module, probe)
        w.pending = flag

    def on_any_after_backward(self, tensors):
        if self.session.pass_state is not None:
            return
        for w in self.models.values():
            if w.pending is not None:
                w.flags.append(w.pending)
                w.pending = None

    def _holds(self, optimizer, w) -> bool:
        key = (id(optimizer), id(w))
        held = self.holds.get(key)
        if held is None:
            held = self.holds[key] = any(id(p) == w.probe for p in self.session.params_of(optimizer))
        return held

    def on_any_step_pre(self, optimizer):
        judging = self.session.pass_state is None
        for w in self.models.values():
            if not w.flags or not self._holds(optimizer, w):
                continue
            flags, w.flags = w.flags, []
            if not judging or len(flags) < 2 or not any(flags):
                continue
            w.windows += 1
            if not flags[-1]:
                w.hits += 1
                if w.first is None:
                    w.first, w.pattern, w.optimizer = self.session.step, flags, id(optimizer)

    def findings(self) -> list:
        out = []
        for w in self.models.values():
            if w.hits < MIN_HITS or w.hits < MIN_SHARE * w.windows:
                continue
            cls = w.cls
            info = self.session.optimizers.get(w.optimizer)
            site = info.site if info is not None else None
            synced = [str(i + 1) for i, f in enumerate(w.pattern) if f]
            message = (f"in {w.hits} of {plural(w.windows, 'accumulation window')} of {cls}, the last backward() "
                       f"before optimizer.step() ran with gradient synchronisation off ({FLAG} was False when its "
                       f"forward ran, as inside no_sync()) while an earlier backward() of the window synchronised "
                       f"(first at step {w.first}: micro-batch {names(synced)} of {len(w.pattern)} all-reduced): "
                       f"each rank steps with its own unreduced gradients of the last micro-batches and the replicas "
                       f"drift apart ({created_at('optimizer', site)}); run only micro-batches 1 to N-1 inside "
                       f"no_sync() and the last one outside it, and set {FLAG} before the forward, where DDP reads it")
            out.append(self.finding(message, where=site, step=w.first, evidence={
                "model": cls, "windows": w.windows, "windows_with_unsynchronised_last_backward": w.hits,
                "first_window_synchronised": list(w.pattern)}))
        return out

