"""KBW074: a view or reshape that puts a tensor's dimensions in another order, which only a permute
can do: `x.view(N, C, H, W)` of an (N, H, W, C) batch, `h.view(B, -1)` of an (L, B, H) state, heads
merged with `reshape(B, T, H * D)` while still laid out (B, H, T, D).

Criterion: on sampled steps, Tensor.view / Tensor.reshape / torch.reshape returns a shape that (size-1
dimensions left out) crosses the input's: some output dimension spans part of one input dimension and
part of the next without containing either (a split, a merge, or a split and a merge side by side
never cross), and the output is exactly the input's dimensions taken in another order and grouped in
runs (the (N, C, H, W) above is (N, H, W, C) reordered; (B, T, H * D) is (B, H, T, D) reordered and
grouped), or else the input's dimensions in another order, split and grouped without crossing, where
every dimension that moved is a whole dimension of the output (windows (B * n, C, h, w) viewed as
(B, n, h, w, C) without their permute), or else the output's dimensions shared out among the input's
so that each input dimension is the exact product of its share, in another order (a generated kernel
(bands, k * k * E) viewed as (E, bands, k, k): the last axis split into k, k, E with E moved first).
The same call site does this on at least MIN_STEPS sampled steps. Calls made by torch's own code are
left out: nn.MultiheadAttention's head split, (T, B, E) into (T, B * heads, E / heads), matches the
rule whenever B * heads happens to equal E and E / heads equals B. A reshape whose sizes only coincide
with a reordering would also match; sizes that are all different make that unlikely, and equal sizes
swapped keep the shape, so that form is not seen.
"""
from __future__ import annotations

import itertools

from kb_tools.watch.checks import Check, plural
from kb_tools.watch.sites import caller_is_torch, user_site

MIN_STEPS = 2
MAX_DIMS = 6       # inputs with more non-unit dimensions are not examined (6! orders at most)
MAX_VERDICTS = 512  # distinct (input, output) shape pairs remembered
MAX_SITES = 16


def _spans(dims: tuple) -> list:
    out, start = [], 1
    for d in dims:
        out.append((start, start * d))
        start *= d
    return out


def crosses(source: tuple, result: tuple) -> bool:
    """Whether some output dimension overlaps an input dimension partly (neither holds the other):
    element offsets seen as products of the sizes before each dimension."""
    spans = _spans(result)
    for a, b in _spans(source):
        for c, d in spans:
            if a < c < b < d or c < a < d < b:
                return True
    return False


def _grouped(order: tuple, result: tuple) -> bool:
    i = 0
    for r in result:
        size = 1
        while size < r and i < len(order):
            size *= order[i]
            i += 1
        if size != r:
            return False
    return i == len(order)


def reordering(source: tuple, result: tuple) -> tuple | None:
    """The order of `source`'s dimensions (size 1 left out) that gives `result` when `result`
    crosses `source`: grouped in runs, or else split and grouped without crossing, with every axis
    it moves kept whole in `result`; None when no order other than the given one does."""
    s = tuple(d for d in source if d != 1)
    r = tuple(d for d in result if d != 1)
    if s == r or len(s) < 2 or len(s) > MAX_DIMS or not crosses(s, r):
        return None
    orders = [o for o in sorted(set(itertools.permutations(s))) if o != s]
    for order in orders:
        if _grouped(order, r):
            return order
    for order in orders:   # reordered, then some axes split (a batch axis into windows, say)
        moved = {d for d, was in zip(order, s) if d != was}
        if not crosses(order, r) and moved <= set(r):
            return order
    if len(r) <= MAX_DIMS and sorted(r) != sorted(s) and split_into(s, r) is not None:
        return r   # some axes split into factors that are the output's axes, then put in another order
    return None


def split_into(source: tuple, result: tuple) -> list | None:
    """For each of `source`'s dimensions (size 1 left out), the sizes of `result`'s dimensions it splits
    into, when `result`'s dimensions can be shared out so (each used once, products exact): a generated
    kernel (bands, k * k * E) viewed as (E, bands, k, k) is (bands, k, k, E) put in another order. None
    when no such sharing exists."""
    s = [d for d in source if d != 1]
    r = [d for d in result if d != 1]

    def share(i: int, left: tuple) -> list | None:
        if i == len(s):
            return [] if not left else None
        for n in range(1, len(left) + 1):
            for picked in sorted(set(itertools.combinations(left, n))):
                if _product(picked) != s[i]:
                    continue
                rest = list(left)
                for d in picked:
                    rest.remove(d)
                tail = share(i + 1, tuple(rest))
                if tail is not None:
                    return [picked, *tail]
        return None
    return share(0, tuple(r))


def _product(dims) -> int:
    out = 1
    for d in dims:
        out *= d
    return out


class ViewReordersDimensions(Check):
    __doc__ = __doc__
    code = "KBW074"
    name = "view-reorders-dimensions"
    entry = "view-instead-of-permute"
    title = "a view or reshape gives the input's dimensions in another order: the values are cut, not moved"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.verdicts: dict = {}   # (source, result) -> reordered source dims or None
        self.sites: dict = {}      # site -> [sampled steps seen, last step, name, source, result, order, first step]

    def on_reshape(self, name, source_shape, result_shape):
        key = (source_shape, result_shape)
        if key in self.verdicts:
            order = self.verdicts[key]
        else:
            order = reordering(source_shape, result_shape)
            if len(self.verdicts) < MAX_VERDICTS:
                self.verdicts[key] = order
        if order is None or caller_is_torch(depth=2):
            return
        site = user_site(depth=2)
        step = self.session.step
        st = self.sites.get(site)
        if st is None:
            if len(self.sites) >= MAX_SITES:
                return
            st = self.sites[site] = [0, None, name, source_shape, result_shape, order, step]
        if st[1] != step:
            st[0] += 1
            st[1] = step

    def findings(self) -> list:
        out = []
        for site, (steps, _, name, source, result, order, first) in self.sites.items():
            if steps < MIN_STEPS:
                continue
            where = f" at {site}" if site else ""
            message = (f"{name}{where} turned a {_shape(source)} tensor into {_shape(result)} on "
                       f"{plural(steps, 'sampled step')} from step {first}: that is the input's dimensions"
                       f"{_split_words(source, order)} in the order {_shape(order)}, but view and reshape never move "
                       f"values, so every slice of the "
                       f"result mixes pieces of different rows, channels or positions; move the axes with "
                       f"permute or transpose first (then reshape)")
            out.append(self.finding(message, where=site, step=first, evidence={
                "call": name, "input_shape": list(source), "output_shape": list(result),
                "reordered_as": list(order), "sampled_steps": steps}))
        return out


def _split_words(source: tuple, order: tuple) -> str:
    """" split (512 into 32 x 4 x 4)" when the reordering found splits input dimensions, else ""."""
    s = tuple(d for d in source if d != 1)
    if sorted(order) == sorted(s):
        return ""
    groups = split_into(s, order) or []
    parts = [f"{d} into {' x '.join(str(x) for x in g)}" for d, g in zip(s, groups) if len(g) > 1]
    return f" split ({', '.join(parts)}) and put" if parts else ""


def _shape(dims) -> str:
    return "(" + ", ".join(str(d) for d in dims) + ")"

