"""KBW035: a layer whose units all hold the same weights and stay the same while it trains (symmetry).

Criterion: a trainable weight of a watched model with at least 2 dimensions and at least 2
output units (rows) has every row equal to the first (to 1e-6 of its largest magnitude) at the
first sampled step, and again at a sampled step at least MIN_STEPS optimizer steps later, while
its values changed in between (the optimizer is moving it). Units that start equal get equal
gradients, so only a constant initialisation keeps them equal; a zero-initialised output layer
is trained apart by its different targets within a few steps and is not reported.
"""
from __future__ import annotations


from kb_tools.watch.checks import Check, created_at, names, plural
from kb_tools.watch.checks.tensors import value_fingerprint

MIN_STEPS = 10
MAX_TRACKED = 64
TOLERANCE = 1e-6


def _rows_equal(p) -> bool:
    w = p.detach().flatten(1)
    scale = float(w.abs().max())
    return float((w - w[:1]).abs().max()) <= TOLERANCE * scale if scale > 0 else True


class IdenticalUnits(Check):
    __doc__ = __doc__
    code = "KBW035"
    name = "identical-units"
    entry = "constant-init-symmetry"
    title = "every unit of a layer has the same weights and they stay the same while it trains"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.looked = False
        self.tracked: dict[int, list] = {}  # id -> [param, name, first step, value fingerprint then]
        self.confirmed: dict[str, tuple] = {}  # name -> (rows, first step, last step)

    def on_step_pre(self, optimizer):
        s = self.session
        if s.optimizer_info(optimizer) is not s.primary_info():
            return
        held = s.trainable_ids()
        if not self.looked:
            self.looked = True
            for model in s.models:
                module = model.module
                if module is None:
                    continue
                for p in module.parameters():
                    if len(self.tracked) >= MAX_TRACKED:
                        break
                    if p.requires_grad and id(p) in held and p.dim() >= 2 and p.shape[0] >= 2 and _rows_equal(p):
                        self.tracked[id(p)] = [p, s.param_name(p), s.step, value_fingerprint(p)]
            return
        for key, (p, name, first, print_) in list(self.tracked.items()):
            if s.step - first < MIN_STEPS:
                continue
            if not _rows_equal(p):
                del self.tracked[key]  # trained apart: not a symmetric init
                self.confirmed.pop(name, None)
            elif value_fingerprint(p) != print_:
                self.confirmed[name] = (p.shape[0], first, s.step)

    def on_end(self):
        self.tracked.clear()  # hold no parameter past the run

    def findings(self) -> list:
        if not self.confirmed:
            return []
        listed = sorted(self.confirmed)
        rows = {n: r for n, (r, _, _) in self.confirmed.items()}
        first = min(f for _, f, _ in self.confirmed.values())
        last = max(t for _, _, t in self.confirmed.values())
        where = self.session.where()
        message = (f"{plural(len(listed), 'weight')} ({names([f'{n} ({rows[n]} units)' for n in listed])}) kept every "
                   f"unit's weights identical from step {first} to step {last} while the "
                   f"{created_at('optimizer', where)} moved them: units that start equal get equal gradients, so "
                   f"the layer acts as one unit; initialise the weights randomly")
        evidence = {"weights": listed[:50], "units": rows, "equal_from_step": first, "equal_at_step": last,
                    "tolerance": TOLERANCE}
        return [self.finding(message, evidence=evidence, where=where, step=first)]
