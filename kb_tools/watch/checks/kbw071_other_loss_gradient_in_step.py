"""KBW071: an optimizer steps on gradients that another network's loss left in its parameters.

Criterion: on at least 3 sampled occasions, an optimizer Y steps on gradients written since its
last clear (or its last step) by two backward() passes with another optimizer Z's step between
them: the first also wrote into Z's parameters, and Z stepped on it (it was Z's loss, such as a
generator's adversarial loss back-propagated through a discriminator that still requires grad);
the second is Y's own. Y's step then applies the sum of both: the generator's wish that the
discriminator call the fakes real is applied to the discriminator with its own loss. Only events
seen whole are counted (every step from that backward to Y's step sampled). Clearing Y's gradients
before its own backward(), or freezing its parameters during Z's update, leaves only its own, and
is not reported; nor is gradient accumulation (no other step in between), nor two optimizers over
one loss (no later backward of Y's own).
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, created_at, plural

MIN_EVENTS = 3
MAX_WRITERS = 64  # backward passes remembered per optimizer between its clears


class _Opt:
    __slots__ = ("writers", "steps")

    def __init__(self):
        self.writers: list = []  # (time, step, ids of the optimizers that backward wrote into)
        self.steps: list = []    # times of its latest steps (a few)


class OtherLossGradientInStep(Check):
    __doc__ = __doc__
    code = "KBW071"
    name = "other-loss-gradient-in-step"
    entry = "optimizer-step-order"
    title = "an optimizer steps on gradients another network's loss left in its parameters, with its own"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.opts: dict[int, _Opt] = {}
        self.time = 0
        self.events = 0
        self.first = None  # (step, id(Y), id(Z))

    def _live(self):
        for opt in self.session.live_optimizers():
            yield opt, self.opts.setdefault(id(opt), _Opt())

    def on_before_backward(self, tensors):
        for opt, st in self._live():
            if not self.session.grad_norm_before_backward(opt):
                st.writers = []  # cleared (set to None or zeroed) since: earlier writers are gone

    def on_after_backward(self, tensors):
        self.time += 1
        wrote = [(opt, st) for opt, st in self._live() if self.session.backward_wrote(opt)]
        ids = frozenset(id(opt) for opt, _ in wrote)
        for _, st in wrote:
            if len(st.writers) < MAX_WRITERS:
                st.writers.append((self.time, self.session.step, ids))

    def on_step_pre(self, optimizer):
        s = self.session
        self.time += 1
        st = self.opts.setdefault(id(optimizer), _Opt())
        writers = [w for w in st.writers if all(s.is_sampled(k) for k in range(w[1], s.step + 1))]
        other = self._other_loss(optimizer, writers)
        if other is not None:
            self.events += 1
            if self.first is None:
                self.first = (s.step, id(optimizer), other)
        st.writers = []  # what this step applied is consumed; carrying it on is KBW003's case
        st.steps = (st.steps + [self.time])[-8:]

    def _other_loss(self, optimizer, writers) -> int | None:
        """id of an optimizer Z that stepped on a backward which also wrote into `optimizer`'s
        parameters, followed (before this step) by another backward into them."""
        for t_b, _, targets in writers:
            for key in targets:
                if key == id(optimizer):
                    continue
                z = self.opts.get(key)
                stepped = [t for t in (z.steps if z else ()) if t > t_b]
                if stepped and any(t_own > stepped[0] for t_own, _, _ in writers):
                    return key
        return None

    def findings(self) -> list:
        if self.events < MIN_EVENTS or self.first is None:
            return []
        s = self.session
        step, y_key, z_key = self.first
        y, z = s.optimizers.get(y_key), s.optimizers.get(z_key)
        y_name = f"{y.cls} ({created_at('optimizer', y.site)})" if y else "an optimizer"
        z_name = f"{z.cls} ({created_at('optimizer', z.site)})" if z else "another optimizer"
        message = (f"{y_name} stepped on gradients that another loss had left in its parameters, on "
                   f"{plural(self.events, 'sampled occasion')} from step {step}: a backward() whose loss {z_name} "
                   f"then stepped on also wrote into them, and their own backward() added to it before their step(); "
                   f"clear their gradients just before their own backward() (or set requires_grad_(False) on them "
                   f"during the other update)")
        return [self.finding(message, where=y.site if y else None, step=step, evidence={
            "occasions": self.events, "first_step": step, "optimizer": y.cls if y else None,
            "other_optimizer": z.cls if z else None, "other_optimizer_site": z.site if z else None})]
