"""KBW107: gradients of accumulated backward() calls cleared before any step() used them: a
zero_grad() inside an accumulation window (at the top of each epoch, in a logging helper, on its
own schedule) throws away the micro-batches accumulated before it.

Criterion: on every step, one small parameter of each optimizer is looked at before and after each
backward() (host-side only: whether its .grad is None, the gradient tensor's identity and version
counter; no value is read). A backward() wrote it when the gradient afterwards is another tensor or
a newer version. A window is the backward() calls that wrote it between two step() calls of any
optimizer (a step of one network ends the other's window too, as in KBW100). In a window, a
backward() that finds the gradient None (cleared with set_to_none, torch's default) after earlier
backward() calls of the window wrote it makes those earlier calls lost; one that finds it still
there accumulates. Reported when, over the windows of at least 2 backward() calls, at least
MIN_HITS windows lost calls that way, at least one window accumulated (the run does accumulate),
the lost calls are at least MIN_LOST_SHARE of the windows' backward() calls (a couple of leftover
micro-batches dropped at the end of a long epoch are not this), and fewer than KBW100's share of
the windows were cleared before every backward() after their first (that pattern is KBW100's). Not
judged: a window whose parameters moved between its backward() calls (a sharpness-aware step), one
in which an enabled GradScaler skipped a step (scaler.step() found an inf or NaN, and the zero_grad()
after it cleared the overflowed gradients on purpose; told from the scaler's scale and growth
tracker, read where that costs no device synchronisation: in host memory, or on a sampled step with
the previous step read too; a window it cannot tell is not judged), and the evaluation pass and
brief run after --steps (their epochs are cut to a batch or two).
"""
from __future__ import annotations

import weakref

from kb_tools.watch.checks import Check, created_at, plural
from kb_tools.watch.checks.kbw100_accumulation_cleared_between_backwards import MIN_SHARE as KBW100_SHARE
from kb_tools.watch.checks.tensors import grad_mark

MIN_HITS = 3
MIN_LOST_SHARE = 0.1
MAX_OPTIMIZERS = 8



class _State:
    __slots__ = ("probe", "weights", "before", "writes", "backwards", "kept", "lost", "moved")

    def __init__(self, probe):
        self.probe = weakref.ref(probe)
        self.weights = 0                # the parameter's own version at the window's first write
        self.before = None              # grad_mark of its gradient before the backward() under way
        self.writes = 0                 # backward() calls of this window whose gradient is still held
        self.backwards = 0              # backward() calls of this window that wrote the gradient
        self.kept = 0                   # of those, the ones that found earlier writes still there
        self.lost = 0                   # backward() calls of this window whose gradient was cleared
        self.moved = False


class _Tally:
    """An optimizer's judged windows (at least 2 backward() calls each). A window that did not accumulate
    (kept none) had the gradient cleared before every backward() after its first: KBW100's pattern."""

    __slots__ = ("windows", "hits", "accumulated", "backwards", "lost", "first")

    def __init__(self):
        self.windows = self.hits = self.accumulated = self.backwards = self.lost = 0
        self.first = None   # the first step whose window lost backward() calls


class BackwardsClearedBeforeTheirStep(Check):
    __doc__ = __doc__
    code = "KBW107"
    name = "backwards-cleared-before-their-step"
    entry = "optimizer-step-order"
    title = "zero_grad() inside an accumulation window: the micro-batches accumulated before it never reach a step"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.states: dict = {}   # id(optimizer) -> _State of the window under way
        self.tally: dict = {}    # id(optimizer) -> _Tally
        self.reads: dict = {}    # id(GradScaler) -> (scale, growth tracker, step) when last read

    def _state(self, opt):
        st = self.states.get(id(opt))
        p = st.probe() if st is not None else None
        if p is None:
            if len(self.states) >= MAX_OPTIMIZERS and st is None:
                return None
            params = [q for q in self.session.params_of(opt) if q.requires_grad]
            if not params:
                return None
            st = self.states[id(opt)] = _State(min(params, key=lambda q: q.numel()))
        return st

    def on_any_backward(self, tensors):
        if self.session.pass_state is not None:
            return
        for opt in self.session.live_optimizers():
            st = self._state(opt)
            if st is not None:
                p = st.probe()
                st.before = grad_mark(p.grad) if p is not None else None

    def on_any_after_backward(self, tensors):
        if self.session.pass_state is not None:
            return
        for st in self.states.values():
            p = st.probe()
            if p is None or p.grad is None or grad_mark(p.grad) == st.before:
                continue   # this backward() did not write this optimizer's parameter
            if not st.backwards:
                st.weights = p._version   # the window's first write: the step before it has run
            elif p._version != st.weights:
                st.moved = True
            if st.writes:   # earlier backward() calls of this window wrote it
                if st.before is None:
                    st.lost += st.writes
                    st.writes = 0
                else:
                    st.kept += 1
            st.writes += 1
            st.backwards += 1

    def _skipped(self) -> bool | None:
        """Did an enabled GradScaler skip optimizer.step() (an inf or NaN) since the previous step? None when
        that cannot be told: a scaler not read at the previous step, or one whose state would cost a device
        synchronisation to read on an unsampled step. Read from the scale and the growth tracker: update()
        after a step adds one to the tracker or, every growth_interval steps, resets it and multiplies the
        scale by the growth factor; a skip resets it and backs the scale off. So a skip came in between when
        the tracker is 0 and the scale is below the growth factor times the previous one."""
        skipped: bool | None = False
        for info in self.session.scalers:
            scaler = info.scaler
            if scaler is None or not scaler.is_enabled():
                continue
            scale, tracker = getattr(scaler, "_scale", None), getattr(scaler, "_growth_tracker", None)
            if scale is None or tracker is None:
                continue   # not used yet
            if scale.device.type != "cpu" and not self.session.sampled:
                self.reads.pop(id(scaler), None)
                skipped = skipped or None
                continue
            now = (float(scale), int(tracker), self.session.step)
            last = self.reads.get(id(scaler))
            self.reads[id(scaler)] = now
            if last is None or last[2] != now[2] - 1:
                skipped = skipped or None
            elif now[1] == 0 and now[0] < float(getattr(scaler, "_growth_factor", 2.0)) * last[0]:
                skipped = True
        return skipped

    def on_any_step_pre(self, optimizer):
        skipped = self._skipped() if self.session.scalers else False
        judging = skipped is False and self.session.pass_state is None
        for key, st in self.states.items():
            if judging and st.backwards >= 2 and not st.moved:
                t = self.tally.setdefault(key, _Tally())
                t.windows += 1
                t.backwards += st.backwards
                t.accumulated += bool(st.kept)
                if st.lost:
                    t.hits += 1
                    t.lost += st.lost
                    t.first = self.session.step if t.first is None else t.first
            st.writes = st.backwards = st.kept = st.lost = 0
            st.moved = False

    def findings(self) -> list:
        out = []
        for key, t in self.tally.items():
            windows, hits, backwards, lost = t.windows, t.hits, t.backwards, t.lost
            if hits < MIN_HITS or not t.accumulated or lost < MIN_LOST_SHARE * backwards \
                    or windows - t.accumulated >= KBW100_SHARE * windows:
                continue
            info = self.session.optimizers.get(key)
            site = info.site if info is not None else None
            message = (f"in {hits} of {plural(windows, 'accumulation window')}, a backward() found the gradients "
                       f"cleared although earlier backward() calls of the same window had written them and no step() "
                       f"had used them: {lost} of {plural(backwards, 'backward() call')} ({lost / backwards:.0%}) "
                       f"were thrown away ({created_at('optimizer', site)}); a zero_grad() runs inside the window (at "
                       f"the start of an epoch, in a helper): clear the gradients right after step() only, or step "
                       f"on the leftover micro-batches before clearing them")
            out.append(self.finding(message, where=site, step=t.first, evidence={
                "windows": windows, "windows_that_lost_backwards": hits, "windows_that_accumulated": t.accumulated,
                "backward_calls": backwards, "backward_calls_lost": lost, "optimizer": info.cls if info else None}))
        return out
