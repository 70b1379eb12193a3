"""KBW100: gradient accumulation undone: zero_grad() runs before every backward() of an
accumulation window, so step() applies the last micro-batch's gradient only.

Criterion: on at least MIN_HITS sampled steps, and on at least MIN_SHARE of the sampled steps of an
optimizer that had two or more backward() calls writing its gradients (outside its step(): an
LBFGS closure runs inside), every backward() after the first found the optimizer's gradients
cleared (no gradient, or a norm of 0) although the one before it had written them, the optimizer's
parameters did not move in between (a sharpness-aware step perturbs them between its two backward()
calls, on purpose), and the first backward() of the window reached no leaf tensor outside every
optimizer (an input made to require grad for an adversarial example is read from its .grad before
the clearing), and at step() the gradient is the last backward()'s, up to a scale (clipping and
unscaling scale it in place; gradients read after each backward() and combined by hand into a
.grad assigned anew, as an emulation of several ranks does, are another gradient). Any
optimizer's step() ends every window: a backward() that wrote a second network's gradients on its
way (a domain-adversarial loss, a generator's loss through the discriminator) belongs to the step
that followed it, and the second network's own zero_grad() then clears it on purpose.
"""
from __future__ import annotations

import weakref

from kb_tools.watch.checks import Check, created_at, plural
from kb_tools.watch.checks.tensors import leaves_from, value_fingerprint

MIN_HITS = 3
MIN_SHARE = 0.8
MAX_LEAVES = 4096


class _Window:
    __slots__ = ("backwards", "cleared", "kept", "moved", "probe", "print", "input_grad", "grad_print", "grad_ref",
                 "first_roots")

    def __init__(self):
        self.backwards = 0        # backward() calls that wrote this optimizer's gradients
        self.cleared = 0          # of those after the first, the ones that found the gradients cleared
        self.kept = 0             # ... the ones that found them still there (accumulating)
        self.moved = False        # the parameters moved between two of them
        self.probe = None         # weak reference to one parameter, and its values at the last backward()
        self.print = None
        self.input_grad = False   # the first backward() reached a leaf outside every optimizer
        self.grad_print = None    # the probe's gradient as the last backward() left it (value_fingerprint)
        self.grad_ref = None      # weak reference to that gradient tensor
        self.first_roots = None   # the first backward()'s root nodes, until a second backward() comes


class AccumulationClearedBetweenBackwards(Check):
    __doc__ = __doc__
    code = "KBW100"
    name = "accumulation-cleared-between-backwards"
    entry = "optimizer-step-order"
    title = "zero_grad() before every backward() of an accumulation window: step() sees the last micro-batch only"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.windows: dict = {}   # id(optimizer) -> _Window for the step now accumulating
        self.before: dict = {}    # id(optimizer) -> whether its gradients were clear before this backward()
        self.stepping: set = set()
        self.probes: dict = {}    # id(optimizer) -> weak reference to the parameter looked at
        self.tally: dict = {}     # id(optimizer) -> [hits, sampled steps with 2+ backward() calls, first step, k]

    def on_before_backward(self, tensors):
        if self.stepping:
            return
        self.before = {}
        for opt in self.session.live_optimizers():
            norm = self.session.grad_norm_before_backward(opt)
            self.before[id(opt)] = not norm

    def on_after_backward(self, tensors):
        if self.stepping:
            return
        s = self.session
        for opt in s.live_optimizers():
            if not s.backward_wrote(opt):
                continue
            w = self.windows.setdefault(id(opt), _Window())
            ref = self.probes.get(id(opt))
            p = ref() if ref is not None else None
            if p is None or p.grad is None:
                # the smallest parameter with a gradient (a bias): its values are read on every backward()
                p = min((q for q in s.params_of(opt) if q.grad is not None), key=lambda q: q.numel(), default=None)
                if p is not None:
                    self.probes[id(opt)] = weakref.ref(p)
            w.probe = weakref.ref(p) if p is not None else None
            now = value_fingerprint(p) if p is not None else None
            if w.backwards == 0:
                # the graph of the first backward() is walked only if a second one comes: most steps have one
                w.first_roots = [t.grad_fn for t in (tensors if isinstance(tensors, (list, tuple)) else [tensors])
                                 if getattr(t, "grad_fn", None) is not None]
            else:
                if w.first_roots is not None:
                    trained = s.trainable_ids()
                    w.input_grad = any(id(leaf) not in trained for leaf in leaves_from(w.first_roots, MAX_LEAVES))
                    w.first_roots = None
                if now != w.print:
                    w.moved = True
                if self.before.get(id(opt)):
                    w.cleared += 1
                else:
                    w.kept += 1
            w.backwards += 1
            w.print = now
            w.grad_print = value_fingerprint(p.grad) if p is not None and p.grad is not None else None
            w.grad_ref = weakref.ref(p.grad) if p is not None and p.grad is not None else None

    def on_step_pre(self, optimizer):
        self.stepping.add(id(optimizer))
        w = self.windows.pop(id(optimizer), None)
        self.windows.clear()  # any step ends every window: a backward() for one network that also wrote
        # another's gradients (a domain-adversarial or generator loss) belongs to that step, not the next
        if w is None or w.backwards < 2 or w.moved or w.input_grad or not self._last_gradient_applied(w):
            return
        t = self.tally.setdefault(id(optimizer), [0, 0, self.session.step, 0])
        t[1] += 1
        if w.cleared == w.backwards - 1 and not w.kept:
            if t[0] == 0:
                t[2] = self.session.step
            t[0] += 1
            t[3] = max(t[3], w.backwards)

    @staticmethod
    def _last_gradient_applied(w) -> bool:
        """Is the probe's gradient at step() the last backward()'s, up to a scale (clipping, unscaling)?
        Gradients that were read after each backward() and combined by hand (ranks emulated in one
        process, averaged into .grad) are another gradient: the clearing between them was on purpose."""
        p = w.probe() if w.probe is not None else None
        if p is None or p.grad is None or w.grad_print is None or w.grad_ref is None or w.grad_ref() is not p.grad:
            return False  # .grad was assigned by hand after the last backward(): another gradient
        (s0, a0, q0), (s1, a1, q1) = w.grad_print, value_fingerprint(p.grad)
        if a0 <= 0 or a1 <= 0:
            return False
        c = a1 / a0
        return abs(s1 - c * s0) <= 1e-4 * a1 and abs(q1 - c * c * q0) <= 1e-4 * q1

    def on_step_post(self, optimizer):
        self.stepping.discard(id(optimizer))
        self.windows.clear()

    def on_any_step_pre(self, optimizer):
        if not self.session.sampled:
            self.windows.clear()  # a window that began unsampled is not judged

    def findings(self) -> list:
        out = []
        for key, (hits, seen, first, k) in self.tally.items():
            if hits < MIN_HITS or hits < MIN_SHARE * seen:
                continue
            info = self.session.optimizers.get(key)
            site = info.site if info is not None else None
            message = (f"on {hits} of {plural(seen, 'sampled step')} with several backward() calls, the gradients "
                       f"were cleared before every backward() after the first (up to {k} per step, "
                       f"{created_at('optimizer', site)}): zero_grad() runs inside the accumulation loop, so step() "
                       f"applies the last micro-batch's gradient only and the effective batch is one micro-batch; "
                       f"call zero_grad() after step(), once per accumulation window")
            out.append(self.finding(message, where=site, step=first, evidence={
                "steps_cleared": hits, "sampled_steps_with_several_backwards": seen, "max_backwards_per_step": k,
                "optimizer": info.cls if info else None}))
        return out
