"""The accumulation window shared by the checks that read gradient accumulation (KBW102, KBW103):
for each optimizer, the backward() calls since its last step(), with what each one was handed.

Not a check itself (the registry takes only kbw* modules): a check subclasses MicroBatchWindows,
says what it reads from each backward() root (`reading`), judges each finished window
(`window_ended`, which tallies it with `count`) and reports the optimizers whose tally holds
(`reported`).
"""
from __future__ import annotations

from kb_tools.watch.checks import Check
from kb_tools.watch.sites import user_site

REDUCTION_MEAN = 1   # torch's Reduction::Mean, as loss nodes save it (_saved_reduction)


def new_batch(before: tuple, now: tuple) -> bool:
    """Between two backward() calls: a new batch of the same DataLoader, or with no DataLoader at all,
    a new call of the watched model."""
    (batches, loader, forwards), (batches2, loader2, forwards2) = before, now
    if loader2 is None:
        return forwards2 > forwards
    return batches2 > batches and loader2 == loader


class Window:
    """The backward() calls that wrote one optimizer's gradients since its last step()."""

    __slots__ = ("readings", "sites", "stacked", "fresh", "last")

    def __init__(self):
        self.readings: list = []   # what the check read from each backward() root
        self.sites: set = set()    # the user's lines that called backward()
        self.stacked = True        # every backward() after the first added to the gradients already there
        self.fresh = True          # ... and came after a new batch of the same loader (or a new model call)
        self.last = None           # (batches yielded, loader, model calls) at the previous backward()

    @property
    def micro_batches(self) -> bool:
        """Two or more backward() calls from one line, each on a new batch, adding up: accumulation."""
        return len(self.readings) >= 2 and self.stacked and self.fresh and len(self.sites) == 1 \
            and None not in self.sites


class MicroBatchWindows(Check):
    """Sampled steps only: each backward() root is read, and the window is judged at step()."""

    def __init__(self, session):
        super().__init__(session)
        self.windows: dict = {}   # id(optimizer) -> Window of the step now accumulating
        self.pending = None       # (line, reading, {id(optimizer): gradients present before}, data) of this backward()
        self.batches = 0          # DataLoader batches yielded so far, and the loader of the last one
        self.loader = None
        self.forwards = 0         # grad-enabled calls of a watched model so far
        self.tally: dict = {}     # id(optimizer) -> [hits, windows judged, first hit's step, largest value, its line]

    def reading(self, root):
        """What this check reads from a backward() root (an autograd node, or None)."""
        raise NotImplementedError

    def window_ended(self, optimizer, window: Window) -> None:
        """Judge a window of two or more backward() calls, at its optimizer's step()."""
        raise NotImplementedError

    def count(self, optimizer, window: Window, hit: bool, value) -> None:
        """Tally one judged window of `optimizer`: a hit keeps the first step and line, and the largest
        value the check measured (micro-batches, a spread)."""
        t = self.tally.setdefault(id(optimizer), [0, 0, None, 0, None])
        t[1] += 1
        if hit:
            t[0] += 1
            if t[2] is None:
                t[2], t[4] = self.session.step, next(iter(window.sites))
            t[3] = max(t[3], value)

    def reported(self, min_windows: int, min_share: float):
        """(hits, windows judged, first step, largest value, line, optimizer's creation site) of each
        optimizer with at least `min_windows` hits, at least `min_share` of its judged windows."""
        for key, (hits, windows, step, value, line) in self.tally.items():
            if hits >= min_windows and hits >= min_share * windows:
                info = self.session.optimizers.get(key)
                yield hits, windows, step, value, line, info.site if info is not None else None

    def on_any_batch(self, loader, batch, serial):
        self.batches += 1
        self.loader = id(loader)

    def on_root_forward(self, model, grad_enabled):
        if grad_enabled:
            self.forwards += 1

    def on_before_backward(self, tensors):
        root = getattr(tensors[0], "grad_fn", None) if tensors else None
        s = self.session
        self.pending = (user_site(depth=3), self.reading(root),
                        {id(opt): bool(s.grad_norm_before_backward(opt)) for opt in s.live_optimizers()},
                        (self.batches, self.loader, self.forwards))

    def on_after_backward(self, tensors):
        if self.pending is None:
            return
        site, reading, before, data = self.pending
        self.pending = None
        for opt in self.session.live_optimizers():
            if not self.session.backward_wrote(opt):
                continue
            w = self.windows.setdefault(id(opt), Window())
            if w.readings:
                w.stacked = w.stacked and before.get(id(opt), False)
                w.fresh = w.fresh and new_batch(w.last, data)
            w.last = data
            w.readings.append(reading)
            w.sites.add(site)

    def on_step_pre(self, optimizer):
        w = self.windows.pop(id(optimizer), None)
        self.windows.clear()   # any step ends every window
        if w is not None and len(w.readings) >= 2:
            self.window_ended(optimizer, w)
