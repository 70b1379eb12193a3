"""Which DataLoaders feed training and which feed evaluation, told from what follows their batches:
the checks that compare a training dataset with an evaluation dataset share this reading."""
from __future__ import annotations

import random
import sys
import time
import weakref

import torch

from kb_tools.watch.checks import Check

MIN_EVAL_BATCHES = 2
MAX_LOADERS = 16


class _Loader:
    __slots__ = ("ref", "dataset", "eval_batches", "trained", "announced")

    def __init__(self, loader):
        self.ref = weakref.ref(loader)
        self.dataset = _weak(getattr(loader, "dataset", None))
        self.eval_batches = 0
        self.trained = False
        self.announced = False

    def continue_from(self, states) -> None:
        """A loader built again over the dataset of an earlier one that never trained (an evaluation
        helper that makes its loader on each call, often one batch long) goes on with that one's tally
        of evaluation batches, and is not announced again."""
        dataset = self.dataset() if self.dataset is not None else None
        if dataset is None:
            return
        for state in states:
            if state is not self and not state.trained and state.dataset is not None and state.dataset() is dataset:
                self.eval_batches = max(self.eval_batches, state.eval_batches)
                self.announced = self.announced or state.announced


def _weak(obj):
    try:
        return weakref.ref(obj) if obj is not None else None
    except TypeError:
        return None


class LoaderRoles:
    """A loader trains once a backward() follows one of its batches before the next batch of any
    loader. It evaluates once MIN_EVAL_BATCHES of its batches were each followed by a watched
    model's call under no_grad or in eval mode and no backward(), and none by a backward(); the
    batches of earlier loaders over the same dataset that never trained count too. The
    owner forwards its on_any_batch, on_root_forward and on_any_backward calls (every call: each
    costs a few attribute reads)."""

    def __init__(self):
        self.loaders: dict[int, _Loader] = {}
        self.latest: _Loader | None = None   # the loader of the latest batch
        self.latest_loader = None            # that loader, held until the next batch (one built per
                                             # evaluation is often dropped right after its last batch)
        self.evaluated = False               # a model call under no_grad or in eval mode since that batch
        self.backward_seen = False           # a backward() since that batch

    def batch(self, loader):
        """A batch came from `loader`. Returns ("training" or "evaluation", that loader) when what
        followed the previous batch settled a loader's role for the first time, else None."""
        settled = self._settle()
        state = self.loaders.get(id(loader))
        if state is None or state.ref() is not loader:
            if len(self.loaders) >= MAX_LOADERS:
                self.loaders = {k: v for k, v in self.loaders.items() if v.ref() is not None}
            if len(self.loaders) >= MAX_LOADERS:
                state = None
            else:
                state = _Loader(loader)
                state.continue_from(self.loaders.values())
                self.loaders[id(loader)] = state
        self.latest, self.evaluated, self.backward_seen = state, False, False
        self.latest_loader = loader if state is not None else None
        return settled

    def model_call(self, model, grad_enabled: bool) -> None:
        if self.latest is not None and not self.evaluated:
            module = model.module
            self.evaluated = not grad_enabled or (module is not None and not module.training)

    def backward(self) -> None:
        self.backward_seen = True

    def finish(self):
        """The run is over: what followed the last batch settles its loader's role too (an evaluation
        that ends the script has no next batch to do it)."""
        return self._settle()

    def _settle(self):
        state, loader, self.latest, self.latest_loader = self.latest, self.latest_loader, None, None
        if state is None:
            return None
        if self.backward_seen:
            first, state.trained = not state.trained, True
            return ("training", loader) if first and loader is not None else None
        if self.evaluated:
            state.eval_batches += 1
            if state.eval_batches >= MIN_EVAL_BATCHES and not state.trained and not state.announced \
                    and loader is not None:
                state.announced = True
                return "evaluation", loader
        return None


class LoaderRoleCheck(Check):
    """A check that knows each DataLoader's role: it keeps a LoaderRoles fed from its callbacks and
    hears `on_loader_role(role, loader)` once a loader's role settles."""

    def __init__(self, session):
        super().__init__(session)
        self.roles = LoaderRoles()

    def on_any_batch(self, loader, batch, serial):
        settled = self.roles.batch(loader)
        if settled is not None:
            self.on_loader_role(*settled)

    def on_root_forward(self, model, grad_enabled):
        self.roles.model_call(model, grad_enabled)

    def on_any_backward(self, tensors):
        self.roles.backward()

    def on_end(self):
        settled = self.roles.finish()
        if settled is not None:
            self.on_loader_role(*settled)

    def on_loader_role(self, role: str, loader) -> None:
        """`loader` has just shown itself a "training" or an "evaluation" loader."""


def attribute_walk(root, follow, max_depth: int = 3, max_objects: int = 64):
    """Every (path, name, value) among the attributes of `root` (the items of a list or tuple, named
    "[i]"), and of each value `follow(name, value)` admits, MAX_DEPTH levels down, each object
    once: how the checks find what a dataset holds (its transforms, generators, label maps)."""
    seen, stack = {id(root)}, [(root, type(root).__name__, 0)]
    while stack and len(seen) < max_objects:
        obj, path, depth = stack.pop()
        if isinstance(obj, (list, tuple)):
            items = [(f"[{i}]", v) for i, v in enumerate(obj[:16])]
        else:
            attributes = getattr(obj, "__dict__", None)
            items = list(attributes.items())[:200] if isinstance(attributes, dict) else []
        for name, value in items:
            where = f"{path}{name}" if name.startswith("[") else f"{path}.{name}"
            yield where, name, value
            if depth < max_depth and id(value) not in seen and follow(name, value):
                seen.add(id(value))
                stack.append((value, where, depth + 1))


def read_unwatched(dataset, indices: list, reads: int = 1, convert=None, budget_s: float | None = None):
    """`reads` reads of dataset[i] for each index (each passed through `convert`), none of them seen
    by the checks, with torch's, Python's and NumPy's global random states as they were before;
    None when a read fails (whatever the user's dataset raises, nothing is judged) or when the reads
    have taken more than `budget_s` seconds (a dataset that decodes video or fetches over a network
    is not read nine times)."""
    from kb_tools.watch import hooks
    numpy = sys.modules.get("numpy")
    states = (torch.get_rng_state(), random.getstate(), numpy.random.get_state() if numpy is not None else None)
    convert = convert or (lambda item: item)
    start = time.perf_counter()
    try:
        with hooks.unwatched(), torch.no_grad():
            out = []
            for i in indices:
                out.append([])
                for _ in range(reads):
                    out[-1].append(convert(dataset[i]))
                    if budget_s is not None and time.perf_counter() - start > budget_s:
                        return None
            return out
    except Exception:  # noqa: BLE001
        return None
    finally:
        torch.set_rng_state(states[0])
        random.setstate(states[1])
        if numpy is not None:
            numpy.random.set_state(states[2])
