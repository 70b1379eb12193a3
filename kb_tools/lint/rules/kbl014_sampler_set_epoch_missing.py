"""What it finds: a shuffling `DistributedSampler` in a file that never calls `set_epoch`; one built
with `shuffle=False`, or bound to a validation or test name, needs no epoch and is left alone.

Why it hurts training: the sampler seeds its shuffle with the epoch number; never told the
epoch, it shuffles identically every epoch, so each rank sees the same samples in the same
order each time and the run generalises worse than a shuffled one.

Example:
    sampler = DistributedSampler(dataset)
    for epoch in range(epochs):
        for x, y in DataLoader(dataset, sampler=sampler): ...

Use instead:
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for x, y in loader: ...
"""
import ast

from kb_tools.lint.analysis import is_false, keyword

CODE, NAME, ENTRY = "KBL014", "sampler-set-epoch-missing", "distributed-sampler-set-epoch"
MESSAGE = "DistributedSampler is never told the epoch (sampler.set_epoch(epoch)): every epoch uses the same order"


def check(a, emit):
    if any(isinstance(c.func, ast.Attribute) and c.func.attr == "set_epoch" for c in a.index.calls):
        return
    for c in a.index.calls:
        if not (a.imp.canon(c.func) or "").endswith("DistributedSampler") or is_false(keyword(c, "shuffle")):
            continue   # shuffle=False: one fixed order is what was asked for
        name = (a.assigned.get(id(c)) or "").lower()
        if any(word in name for word in ("val", "test", "eval")):
            continue   # an evaluation sampler: its order does not matter
        emit(c, CODE)
