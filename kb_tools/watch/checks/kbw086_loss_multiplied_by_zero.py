"""KBW086: backward() on a loss multiplied by zero, between steps with a real loss: a placeholder
for batches that have no label left to learn from.

Criterion: at one backward() call site, at least 3 calls after a call with a real loss start from a
product with the constant 0 (`logits.sum() * 0.0`: the graph-connected zero a trainer returns for
a batch whose labels are all masked, so that every parameter still takes part in a distributed
backward), and such calls are at most 95% of that site's calls. Those steps learn nothing and log
a loss of 0. Zeros only before the site's first real loss (a discriminator weighted 0 until it
starts, a warm-up factor that begins at 0) are not counted. Read on every backward() from the root
node of its graph; a constant kept on an accelerator is not read (that would synchronise it).
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, plural
from kb_tools.watch.checks.tensors import constant_factor
from kb_tools.watch.sites import user_site

MIN_CALLS = 3
MAX_SHARE = 0.95
MAX_SITES = 16


class _Site:
    __slots__ = ("calls", "zeros", "real", "after_real", "first_step")

    def __init__(self):
        self.calls = self.zeros = self.after_real = 0
        self.real = False
        self.first_step = None


class LossMultipliedByZero(Check):
    __doc__ = __doc__
    code = "KBW086"
    name = "loss-multiplied-by-zero"
    entry = "labels-all-masked"
    title = "backward() on a loss multiplied by 0 between real steps: a placeholder for batches with no label left"
    confidence = 0.7

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict[str, _Site] = {}

    def on_any_backward(self, tensors):
        fn = getattr(tensors[0], "grad_fn", None) if tensors else None
        if fn is None:
            return
        where = user_site(depth=3) or "?"
        site = self.sites.get(where)
        if site is None:
            if len(self.sites) >= MAX_SITES:
                return
            site = self.sites[where] = _Site()
        site.calls += 1
        if constant_factor(fn, host_only=True) == ("mul", 0.0):
            site.zeros += 1
            if site.real:
                site.after_real += 1
                if site.first_step is None:
                    site.first_step = self.session.step
        else:
            site.real = True

    def findings(self) -> list:
        out = []
        for where, site in self.sites.items():
            if site.after_real < MIN_CALLS or site.zeros > MAX_SHARE * site.calls:
                continue
            message = (f"backward() at {where} ran on a loss multiplied by 0 on {plural(site.zeros, 'call')} of "
                       f"{site.calls} (first after a real loss at step {site.first_step}): a placeholder such as "
                       f"`logits.sum() * 0.0`, which a trainer returns for a batch with no label left to score "
                       f"(every label masked, often by truncation); those steps learn nothing and log 0. Keep "
                       f"the answer tokens when truncating, or drop examples without any label before batching")
            out.append(self.finding(message, where=where, step=site.first_step,
                                    evidence={"zero_calls": site.zeros, "calls": site.calls,
                                              "zero_after_real": site.after_real, "first_step": site.first_step}))
        return out
