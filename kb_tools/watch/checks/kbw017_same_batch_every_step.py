"""KBW017: the DataLoader yields the same batch on every step (a new iterator, or a new loader, per step).

Criterion: the first tensor of the batches drawn from one loader (by creation site) has the
same fingerprint (shape, dtype, sum and 8 strided elements) as the batch of the previous
optimizer step on at least 5 pairs of consecutive sampled steps, and on at least 80% of such
pairs, while the loader has at least 2 batches per pass. `next(iter(loader))` inside the loop,
or a loader rebuilt each step with a freshly seeded generator, restarts the epoch every step
and trains on its first batch only; a loader iterated normally never repeats a batch on
consecutive steps.

Second form, between two optimizer steps (an evaluation loop, on any step): a loader with at
least 2 batches per pass is restarted at least MIN_RESTARTS times in a row, each new iterator
gives one batch only, and that batch is the same each time. `next(iter(val_loader))` in the
loop body does this: the evaluation measures copies of the first batch.
"""
from __future__ import annotations


from kb_tools.watch.checks import Check, created_at
from kb_tools.watch.checks.tensors import first_tensor, fingerprint

MIN_REPEATS = 5
MIN_RESTARTS = 5  # identical one-batch iterators in a row, after the first, between two steps
SHARE = 0.8
MAX_KEYS = 64


class _Restarts:
    """One loader's iterators, as they come: the latest iterator's serial and batches, and the run of
    identical one-batch iterators it ends."""
    __slots__ = ("serial", "batches", "step", "fp", "run", "best", "best_step", "shape")

    def __init__(self):
        self.serial = self.fp = self.best_step = self.shape = None
        self.batches = self.run = self.best = 0
        self.step = -1


class SameBatchEveryStep(Check):
    __doc__ = __doc__
    code = "KBW017"
    name = "same-batch-every-step"
    entry = "same-batch-every-step"
    title = "the same input batch on consecutive steps: the loader restarted every step"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        # key -> [fingerprint, its step, consecutive pairs, repeats, first repeat step, site, batches per pass, shape]
        self.loaders: dict = {}
        self.restarts: dict[int, _Restarts] = {}  # id(loader) -> its iterators, on every step
        self.restart_loaders: dict[int, tuple] = {}  # id(loader) -> (site, batches per pass), for the report

    def on_any_batch(self, loader, batch, serial):
        st = self.restarts.get(id(loader))
        if st is None:
            if len(self.restarts) >= MAX_KEYS:
                return
            st = self.restarts[id(loader)] = _Restarts()
        if serial == st.serial:
            st.batches += 1
            return
        # a new iterator: does it continue a run of one-batch iterators between the same two steps?
        t = first_tensor(batch)
        fp = fingerprint(t) if t is not None else None
        step = self.session.step
        if fp is not None and st.batches == 1 and st.step == step and fp == st.fp:
            st.run += 1
            if st.run > st.best:
                st.best, st.best_step, st.shape = st.run, step, tuple(t.shape)
                if st.best == MIN_RESTARTS:
                    try:
                        per_pass = len(loader)
                    except TypeError:  # an IterableDataset without a length
                        per_pass = None
                    self.restart_loaders[id(loader)] = (self.session.loader_site(loader), per_pass)
        else:
            st.run = 0
        st.serial, st.batches, st.step, st.fp = serial, 1, step, fp

    def on_batch(self, loader, batch):
        if loader is None:
            return
        t = first_tensor(batch)
        if t is None:
            return
        info = self.session.loaders.get(id(loader))
        key = info.site if info is not None and info.site else ("dataset", id(getattr(loader, "dataset", loader)))
        st = self.loaders.get(key)
        if st is None:
            if len(self.loaders) >= MAX_KEYS:
                return
            try:
                per_pass = len(loader)
            except TypeError:  # an IterableDataset without a length
                per_pass = None
            st = self.loaders[key] = [None, None, 0, 0, None, info.site if info is not None else None, per_pass,
                                      tuple(t.shape)]
        fp = fingerprint(t)
        step = self.session.step
        if st[0] is not None and st[1] == step - 1:
            st[2] += 1
            if fp == st[0]:
                st[3] += 1
                if st[4] is None:
                    st[4] = st[1]
        st[0], st[1] = fp, step

    def findings(self) -> list:
        out = []
        for st in self.loaders.values():
            _, _, pairs, repeats, first, site, per_pass, shape = st
            if repeats < MIN_REPEATS or repeats < SHARE * pairs or (per_pass is not None and per_pass < 2):
                continue
            passes = f" of the {per_pass} it holds per pass" if per_pass else ""
            message = (f"the same batch came from the DataLoader ({created_at('loader', site)}) on {repeats} of "
                       f"{pairs} pairs of consecutive sampled steps from step {first}: its first tensor "
                       f"(shape {list(shape)}) had the same sum and elements each time, so training sees one "
                       f"batch{passes}; keep one iterator per epoch instead of calling next(iter(loader)) or "
                       f"building the loader inside the loop")
            out.append(self.finding(message, where=site, step=first, evidence={
                "repeats": repeats, "consecutive_pairs": pairs, "batches_per_pass": per_pass,
                "shape": list(shape)}))
        for key, (site, per_pass) in self.restart_loaders.items():
            st = self.restarts.get(key)
            if st is None or (per_pass is not None and per_pass < 2):
                continue
            passes = f" of the {per_pass} it holds per pass" if per_pass else ""
            message = (f"the DataLoader ({created_at('loader', site)}) was restarted {st.best + 1} times in a row "
                       f"between two optimizer steps (at step {st.best_step}), each new iterator giving one batch, and "
                       f"that batch was the same each time (first tensor of shape {list(st.shape)}): a loop that takes "
                       f"next(iter(loader)) sees only its first batch{passes}; an evaluation computed so measures "
                       f"copies of one batch; iterate the loader itself (for batch in loader)")
            out.append(self.finding(message, where=site, step=st.best_step, evidence={
                "restarts_in_a_row": st.best + 1, "at_step": st.best_step, "batches_per_pass": per_pass,
                "shape": list(st.shape)}))
        return out
