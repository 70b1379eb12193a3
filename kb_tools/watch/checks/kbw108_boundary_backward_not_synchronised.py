"""KBW108: under DistributedDataParallel, the backward() right before a step ran without gradient
synchronisation: no_sync() wraps the wrong micro-batches, or all of them (ddp-no-sync-accumulation).

DDP decides when its forward runs whether the coming backward() all-reduces, from its
`require_backward_grad_sync` attribute (no_sync() sets it to False for the block). That attribute is
read on every grad-enabled call of a watched model that has it (a DistributedDataParallel, or a
wrapper that follows the same contract): one attribute read per call. Each backward() after such a
call is tagged with the flag of the model's latest grad-enabled call. A window is the backward()
calls between two step() calls of an optimizer that holds the model's parameters.

Criterion, the wrong micro-batch synchronised: a window of at least 2 backward() calls whose last
backward() ran unsynchronised although an earlier one of the window synchronised is a hit: the
all-reduce happened on a middle micro-batch, so every rank steps with the mean of the early
micro-batches plus its own unreduced later ones (the flag set after the forward,
`model.require_backward_grad_sync = last` placed before backward(), does this; so does a no_sync()
test that is off by one). Reported when at least MIN_HITS windows are hits and they are at least
MIN_SHARE of the windows of 2 or more backward() calls.

Criterion, nothing synchronised: at least MIN_HITS windows in which no backward() synchronised and
the gradients were not changed in place between the window's last backward() and the step (one
small parameter's gradient is looked at, host-side: its identity and version counter), no window
of the run ever synchronised, and those windows are at least MIN_SHARE of the windows that did not
synchronise. The whole accumulation loop inside no_sync() leaves each rank with its own local
gradient. A window whose gradients were changed in place before the step (reduced by hand after
the no_sync() block, clipped, unscaled by a GradScaler) is not judged: from one rank, a reduction
by hand cannot be told from the others.

Not judged either: the evaluation pass and brief run after --steps.
"""
from __future__ import annotations

import weakref

from kb_tools.watch.checks import Check, created_at, names, plural
from kb_tools.watch.checks.tensors import grad_mark

FLAG = "require_backward_grad_sync"
MIN_HITS = 3
MIN_SHARE = 0.5
MAX_MODELS = 8


class _Model:
    """One DDP-like model: the flag of its latest grad-enabled call, the backward() calls of the window under
    way, and the windows judged so far."""

    __slots__ = ("ref", "cls", "probe", "pending", "flags", "mark", "mixed", "mixed_hits", "ever_synced", "silent",
                 "touched", "first", "pattern", "optimizer", "silent_first", "silent_optimizer")

    def __init__(self, module, probe):
        self.ref = weakref.ref(module)
        self.cls = type(module).__name__
        self.probe = weakref.ref(probe)
        self.pending = None        # the flag of the latest grad-enabled call not yet followed by a backward()
        self.flags: list = []      # per backward() of this window: did its forward synchronise
        self.mark = None           # grad_mark of the probe's gradient right after the window's last backward()
        self.mixed = self.mixed_hits = 0     # windows of 2+ backward() calls, some synchronised; of those, hits
        self.ever_synced = False             # some window of the run had a synchronised backward()
        self.silent = self.touched = 0       # windows with none synchronised: gradients left as is / changed
        self.first = self.pattern = self.optimizer = None     # the first hit of the first criterion
        self.silent_first = self.silent_optimizer = None      # the first window of the second


class BoundaryBackwardNotSynchronised(Check):
    __doc__ = __doc__
    code = "KBW108"
    name = "boundary-backward-not-synchronised"
    entry = "ddp-no-sync-accumulation"
    title = "the backward() right before a DDP step ran inside no_sync(): the gradients were not all-reduced"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.models: dict = {}    # id(model) -> _Model
        self.holds: dict = {}     # (id(optimizer), id(_Model)) -> (weakref to the optimizer, does it hold the model)

    def on_root_input(self, model, args, grad_enabled):
        if not grad_enabled:
            return
        module = model.module
        flag = getattr(module, "__dict__", {}).get(FLAG) if module is not None else None
        if not isinstance(flag, bool):
            return
        m = self.models.get(id(module))
        if m is None or m.ref() is not module:
            if len(self.models) >= MAX_MODELS:
                return
            probe = next((p for p in module.parameters() if p.requires_grad), None)
            if probe is None:
                return
            m = self.models[id(module)] = _Model(module, probe)
        m.pending = flag

    def on_any_after_backward(self, tensors):
        if self.session.pass_state is not None:
            return
        for m in self.models.values():
            if m.pending is not None:
                m.flags.append(m.pending)
                m.pending = None
                p = m.probe()
                m.mark = grad_mark(p.grad) if p is not None else None

    def _holds(self, optimizer, m) -> bool:
        key = (id(optimizer), id(m))
        known = self.holds.get(key)
        if known is None or known[0]() is not optimizer:   # new, or another optimizer now has that id
            p = m.probe()
            known = self.holds[key] = (weakref.ref(optimizer),
                                       p is not None and any(q is p for q in self.session.params_of(optimizer)))
        return known[1]

    def on_any_step_pre(self, optimizer):
        judging = self.session.pass_state is None
        for m in self.models.values():
            if not m.flags or not self._holds(optimizer, m):
                continue
            flags, m.flags = m.flags, []
            if not judging:
                continue
            if any(flags):
                m.ever_synced = True
                if len(flags) >= 2:
                    m.mixed += 1
                    if not flags[-1]:
                        m.mixed_hits += 1
                        if m.first is None:
                            m.first, m.pattern, m.optimizer = self.session.step, flags, id(optimizer)
                continue
            p = m.probe()
            if p is None or grad_mark(p.grad) != m.mark:
                m.touched += 1
                continue
            m.silent += 1
            if m.silent_first is None:
                m.silent_first, m.silent_optimizer = self.session.step, id(optimizer)

    def findings(self) -> list:
        out = []
        for m in self.models.values():
            if m.mixed_hits >= MIN_HITS and m.mixed_hits >= MIN_SHARE * m.mixed:
                out.append(self._wrong_micro_batch(m))
            elif m.silent >= MIN_HITS and not m.ever_synced and m.silent >= MIN_SHARE * (m.silent + m.touched):
                out.append(self._nothing_synchronised(m))
        return out

    def _site(self, key):
        info = self.session.optimizers.get(key)
        return info.site if info is not None else None

    def _wrong_micro_batch(self, m):
        site = self._site(m.optimizer)
        synced = [str(i + 1) for i, f in enumerate(m.pattern) if f]
        message = (f"in {m.mixed_hits} of {plural(m.mixed, 'accumulation window')} of {m.cls}, the last backward() "
                   f"before optimizer.step() ran with gradient synchronisation off ({FLAG} was False when its "
                   f"forward ran, as inside no_sync()) while an earlier backward() of the window synchronised "
                   f"(first at step {m.first}: micro-batch {names(synced)} of {len(m.pattern)} all-reduced): each "
                   f"rank steps with its own unreduced gradients of the last micro-batches and the replicas drift "
                   f"apart ({created_at('optimizer', site)}); run only micro-batches 1 to N-1 inside no_sync() and the "
                   f"last one outside it, and set {FLAG} before the forward, where DDP reads it")
        return self.finding(message, where=site, step=m.first, evidence={
            "model": m.cls, "windows": m.mixed, "windows_with_unsynchronised_last_backward": m.mixed_hits,
            "first_window_synchronised": list(m.pattern)})

    def _nothing_synchronised(self, m):
        site = self._site(m.silent_optimizer)
        message = (f"{m.cls} never synchronised its gradients: before each of {plural(m.silent, 'optimizer step')} "
                   f"every backward() ran with {FLAG} False (inside no_sync()) and nothing changed the gradients "
                   f"between the last backward() and step() (no all-reduce by hand): on more than one process each "
                   f"rank steps with its own local gradient and the replicas drift apart "
                   f"({created_at('optimizer', site)}); leave the last micro-batch's forward and backward outside "
                   f"no_sync()")
        return self.finding(message, where=site, step=m.silent_first, evidence={
            "model": m.cls, "windows_never_synchronised": m.silent, "windows_changed_in_place": m.touched})
