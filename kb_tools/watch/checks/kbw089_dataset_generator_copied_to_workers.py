"""KBW089: a dataset draws its randomness from a generator object of its own, and its DataLoader
runs several worker processes: each worker starts from a copy of that generator in the same state,
so the workers draw the same random numbers (the same crops, flips, noise), again each epoch.

Criterion: on the first batch of a DataLoader with at least 2 workers and no worker_init_fn, the
generator objects its dataset holds (random.Random, numpy.random.Generator or RandomState,
torch.Generator; found in the dataset's attributes and those of the objects it holds: transforms,
mask functions, wrapped datasets, MAX_DEPTH levels, MAX_OBJECTS objects) are read before and after
the check reads one item of the dataset itself, unwatched; a generator whose state the read moved
is drawn from per item. Each generator's state, and the global random states, are restored after
the read. The process-wide generators (torch's default, `random`'s and NumPy's global ones) are
not counted: the DataLoader seeds those per worker. A worker_init_fn may reseed the dataset's
generator per worker, so a loader with one is left alone, as is one that loads in the main process
(one copy, one stream).
"""
from __future__ import annotations

import pickle
import random
import sys

import torch

from kb_tools.watch.checks import Check
from kb_tools.watch.checks.loaders import attribute_walk, read_unwatched

MIN_WORKERS = 2
MAX_DEPTH = 3
MAX_OBJECTS = 64
MAX_LOADERS = 16


class DatasetGeneratorCopiedToWorkers(Check):
    __doc__ = __doc__
    code = "KBW089"
    name = "dataset-generator-copied-to-workers"
    entry = "dataloader-worker-seeds"
    title = "a generator the dataset owns is copied into every DataLoader worker in one state: workers draw alike"
    confidence = 0.7

    def __init__(self, session):
        super().__init__(session)
        self.looked: set = set()   # ids of the loaders looked at
        self.found: dict = {}      # loader site -> (step, evidence)

    def on_any_batch(self, loader, batch, serial):
        if id(loader) in self.looked or len(self.looked) >= MAX_LOADERS:
            return
        self.looked.add(id(loader))
        if (getattr(loader, "num_workers", 0) or 0) < MIN_WORKERS or getattr(loader, "worker_init_fn", None) is not None:
            return
        dataset = getattr(loader, "dataset", None)
        if dataset is None or isinstance(dataset, torch.utils.data.IterableDataset) or not hasattr(dataset, "__len__"):
            return
        owned = owned_generators(dataset)
        if not owned:
            return
        before = [_state(g) for _, g in owned]
        try:
            read = len(dataset) > 0 and read_unwatched(dataset, [0]) is not None
        except TypeError:
            read = False
        moved = [path for (path, g), state in zip(owned, before) if read and _key(_state(g)) != _key(state)]
        for (_, g), state in zip(owned, before):
            _restore(g, state)
        if moved:
            site = self.session.loader_site(loader)
            kinds = {path: type(g).__name__ for path, g in owned}
            self.found.setdefault(site, (self.session.step, {
                "generators": moved, "kinds": [kinds[p] for p in moved], "workers": loader.num_workers,
                "dataset": type(dataset).__name__}))

    def findings(self) -> list:
        out = []
        for site, (step, ev) in self.found.items():
            names = ", ".join(f"`{path}` ({kind})" for path, kind in zip(ev["generators"], ev["kinds"]))
            message = (f"reading one item of the {ev['dataset']} moved the generator it owns, {names}, and its "
                       f"DataLoader{f' (created at {site})' if site else ''} runs {ev['workers']} workers with no "
                       f"worker_init_fn: every worker starts from a copy of that generator in the same state, so "
                       f"the workers draw the same random numbers, and again each epoch. Reseed it per worker in a "
                       f"worker_init_fn from torch.utils.data.get_worker_info().seed, or draw from torch's or "
                       f"NumPy's global generator, which the DataLoader seeds per worker")
            out.append(self.finding(message, where=site, step=step, evidence=ev))
        return out


def _generator_types() -> tuple:
    numpy = sys.modules.get("numpy")
    extra = (numpy.random.Generator, numpy.random.RandomState) if numpy is not None else ()
    return (random.Random, torch.Generator) + extra


def _global_generators() -> set:
    numpy = sys.modules.get("numpy")
    shared = [random._inst, torch.default_generator]
    if numpy is not None:
        shared.append(getattr(numpy.random.mtrand, "_rand", None))
    return {id(g) for g in shared if g is not None}


def owned_generators(dataset) -> list:
    """[(attribute path, generator)] of the generator objects a dataset holds, the process-wide ones
    left out."""
    kinds, shared = _generator_types(), _global_generators()
    found, seen = [], set()
    for path, _, value in attribute_walk(dataset, lambda name, value: not isinstance(value, kinds)
                                         and _worth_walking(value), MAX_DEPTH, MAX_OBJECTS):
        if isinstance(value, kinds) and id(value) not in shared and id(value) not in seen:
            seen.add(id(value))
            found.append((path, value))
    return found


def _worth_walking(value) -> bool:
    """Objects of the user's or a library's own classes (transforms, mask functions, wrapped
    datasets) and short lists of them; never tensors, arrays, modules or plain data."""
    if isinstance(value, (list, tuple)):
        return 0 < len(value) <= 16 and not isinstance(value[0], (int, float, str, bytes))
    if isinstance(value, (torch.Tensor, torch.nn.Module, str, bytes, int, float, bool, dict, set)) or value is None:
        return False
    return hasattr(value, "__dict__") and not type(value).__module__.startswith(("numpy", "builtins"))


def _state(g):
    if isinstance(g, torch.Generator):
        return g.get_state()
    if isinstance(g, random.Random):
        return g.getstate()
    if hasattr(g, "bit_generator"):
        return g.bit_generator.state
    return g.get_state()


def _key(state) -> bytes:
    return state.numpy().tobytes() if isinstance(state, torch.Tensor) else pickle.dumps(state)


def _restore(g, state) -> None:
    if isinstance(g, torch.Generator):
        g.set_state(state)
    elif isinstance(g, random.Random):
        g.setstate(state)
    elif hasattr(g, "bit_generator"):
        g.bit_generator.state = state
    else:
        g.set_state(state)
