"""KBW096: the data was scaled with statistics of all splits together before it was split: the
validation and test periods' mean, spread or extremes shaped the training inputs (a StandardScaler
or a min-max scaler fitted on the whole series or table).

Criterion: when a DataLoader first shows itself a training loader (checks.loaders.LoaderRoles),
and again at the end of the run, the float arrays its dataset holds (a TensorDataset's tensors, a
Subset's rows of its parent's arrays, or the tensors and NumPy arrays among a dataset's own
attributes: at least 2 dimensions, at least MIN_ROWS rows, at most MAX_FEATURES values along the last
axis, at most MAX_VALUES values in all for one dataset) are summarized per feature (the last axis) and compared with
the same summaries of every other DataLoader created in the run over another dataset whose arrays
have the same number of features (the validation and test splits, up to MAX_OTHERS of them). A
feature is judged when its training values vary (at least MIN_DISTINCT distinct values among the
first SAMPLE_ROWS rows). Reported when, for some union of the training split with one or more
other splits, some judged feature is standardized over the union (mean within STD_TOL of 0 and
standard deviation within STD_TOL of 1) but clearly not over the training split alone (mean at least
max(SHIFT, 6 / sqrt(rows)) away from 0, or standard deviation off 1 by at least SHIFT), or is scaled
to [0, 1] or [-1, 1] over the union (its extremes equal to the range's ends within RANGE_TOL) while
the training split alone leaves at least GAP of the range unreached at one end. A scaler fitted on
the training split standardizes the training split itself; one fitted on all rows of shuffled data
leaves the training split standardized too (the splits share their statistics); neither is
reported. Scaling each window or sample on its own is not seen here (the stored data is raw).
"""
from __future__ import annotations

import math
import sys
import warnings
import weakref
from itertools import combinations

import torch

from kb_tools.watch.checks import plural
from kb_tools.watch.checks.loaders import LoaderRoleCheck
from kb_tools.watch.checks.tensors import row_fingerprints

MIN_ROWS = 8
MAX_FEATURES = 4096
MAX_VALUES = 20_000_000
CHUNK = 1_000_000
MAX_OTHERS = 4
MAX_ARRAYS = 8
MIN_DISTINCT = 16
SAMPLE_ROWS = 4096
STD_TOL = 0.02
SHIFT = 0.25
RANGE_TOL = 1e-5
GAP = 0.05


def _arrays(dataset) -> list:
    """The float arrays (as torch tensors, rows first) that `dataset` holds."""
    numpy = sys.modules.get("numpy")
    indices = getattr(dataset, "indices", None)
    parent = getattr(dataset, "dataset", None)
    if indices is not None and isinstance(parent, torch.utils.data.Dataset) and hasattr(parent, "__len__"):
        try:
            index = torch.as_tensor(list(indices) if not isinstance(indices, torch.Tensor) else indices,
                                    dtype=torch.long, device="cpu")
            size = len(parent)
        except (TypeError, ValueError, RuntimeError):
            return []
        if index.numel() == 0:
            return []
        return [a[index.to(a.device)] for a in _arrays(parent) if a.shape[0] == size]
    values = list(getattr(dataset, "tensors", ()) or ())
    attributes = getattr(dataset, "__dict__", None)
    if not values and isinstance(attributes, dict):
        for value in list(attributes.values())[:200]:
            values.extend(value[:16] if isinstance(value, (list, tuple)) else [value])
    out, total = [], 0
    for value in values:
        if numpy is not None and isinstance(value, numpy.ndarray) and value.dtype.kind == "f" and value.ndim >= 2:
            try:
                with warnings.catch_warnings():   # a read-only array: torch warns, and nothing here writes
                    warnings.simplefilter("ignore")
                    value = torch.from_numpy(value)
            except (TypeError, ValueError):
                continue
        if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.dim() < 2 \
                or value.layout != torch.strided or value.shape[0] < MIN_ROWS or value.shape[-1] > MAX_FEATURES \
                or total + value.numel() > MAX_VALUES or isinstance(value, torch.nn.Parameter):
            continue
        total += value.numel()
        out.append(value)
        if len(out) >= MAX_ARRAYS:
            break
    return out


def _new_rows(arrays: list, seen: dict) -> list:
    """`arrays` without the rows (first axis) equal to a row already summarized, which are added to
    `seen` (per trailing shape): the input window a later split repeats from the end of the one
    before it is counted once."""
    out = []
    for a in arrays:
        prints = row_fingerprints(a, min_columns=1)
        if prints is None:
            out.append(a)
            continue
        known = seen.setdefault(tuple(a.shape[1:]), set())
        keep = [p not in known for p in prints]
        known.update(prints)
        if all(keep):
            out.append(a)
        elif any(keep):
            out.append(a[torch.tensor(keep, device=a.device)])
    return out


class _Summary:
    """Per feature (the last axis) of the arrays of one dataset: counts, sums, extremes, and the
    distinct values among the first rows; read CHUNK values at a time in float64."""

    __slots__ = ("rows", "total", "squares", "low", "high", "distinct")

    def __init__(self, arrays: list):
        features = arrays[0].shape[-1]
        self.rows = 0
        self.total = torch.zeros(features, dtype=torch.float64, device="cpu")
        self.squares = torch.zeros(features, dtype=torch.float64, device="cpu")
        self.low = torch.full((features,), math.inf, dtype=torch.float64, device="cpu")
        self.high = torch.full((features,), -math.inf, dtype=torch.float64, device="cpu")
        step = max(1, CHUNK // features)
        for a in arrays:
            flat = a.detach().reshape(-1, features)
            for start in range(0, flat.shape[0], step):
                part = flat[start:start + step].double()
                self.rows += part.shape[0]
                self.total += part.sum(0).cpu()
                self.squares += (part * part).sum(0).cpu()
                self.low = torch.minimum(self.low, part.amin(0).cpu())
                self.high = torch.maximum(self.high, part.amax(0).cpu())
        sample = arrays[0].detach().reshape(-1, features)[:SAMPLE_ROWS].double().sort(0).values
        self.distinct = ((sample[1:] != sample[:-1]).sum(0) + 1).cpu()


def _moments(parts: list) -> tuple:
    rows = sum(p.rows for p in parts)
    mean = sum(p.total for p in parts) / rows
    var = (sum(p.squares for p in parts) / rows - mean * mean).clamp_min(0) * rows / max(rows - 1, 1)
    low = torch.stack([p.low for p in parts]).amin(0)
    high = torch.stack([p.high for p in parts]).amax(0)
    return rows, mean, var.sqrt(), low, high


class ScalerFittedOnAllSplits(LoaderRoleCheck):
    __doc__ = __doc__
    code = "KBW096"
    name = "scaler-fitted-on-all-splits"
    entry = "data-leakage"
    title = "data scaled with the statistics of all splits before the split: held-out data shaped the training inputs"
    confidence = 0.7

    def __init__(self, session):
        super().__init__(session)
        self.training = None     # weakref to the training loader judged
        self.found = None        # the finding's details, once seen
        self.judged = 0

    def on_loader_role(self, role, loader):
        if role == "training" and self.found is None and self.judged < 2:
            self.training = weakref.ref(loader)
            self._judge(loader)

    def on_end(self):
        super().on_end()
        loader = self.training() if self.training is not None else None
        if loader is not None and self.found is None and self.judged < 2:
            self._judge(loader)

    def _judge(self, loader) -> None:
        self.judged += 1
        dataset = getattr(loader, "dataset", None)
        try:
            with torch.no_grad():
                self.found = self._compare(loader, dataset)
            if self.found is not None:
                self.found["training_loader"] = self.session.loader_site(loader)
        except (AttributeError, RuntimeError, TypeError, ValueError, IndexError):
            self.found = None   # a dataset whose arrays cannot be read this way is not judged

    def _compare(self, loader, dataset):
        train_arrays = _arrays(dataset) if dataset is not None else []
        if not train_arrays:
            return None
        others = []
        seen = {id(dataset)}
        for other in self.session.live_loaders():
            data = getattr(other, "dataset", None)
            if other is loader or data is None or id(data) in seen:
                continue
            seen.add(id(data))
            arrays = _arrays(data)
            if arrays:
                others.append((other, arrays))
            if len(others) >= MAX_OTHERS:
                break
        for features in sorted({a.shape[-1] for a in train_arrays}):
            seen: dict = {}
            train = _Summary(_new_rows([a for a in train_arrays if a.shape[-1] == features], seen))
            parts = [(other, _Summary(same)) for other, arrays in others
                     if (same := _new_rows([a for a in arrays if a.shape[-1] == features], seen))]
            if not parts or train.rows < MIN_ROWS:
                continue
            hit = self._union_hit(train, parts)
            if hit is not None:
                return hit
        return None

    def _union_hit(self, train: _Summary, parts: list):
        rows, t_mean, t_std, t_low, t_high = _moments([train])
        judged = (train.distinct >= MIN_DISTINCT) & (t_std > 0)
        if not bool(judged.any()):
            return None
        shift = max(SHIFT, 6 / math.sqrt(rows))
        for size in range(len(parts), 0, -1):
            for chosen in combinations(parts, size):
                _, mean, std, low, high = _moments([train] + [s for _, s in chosen])
                standardized = judged & ((mean.abs() <= STD_TOL) & ((std - 1).abs() <= STD_TOL)) \
                    & ((t_mean.abs() >= shift) | ((t_std - 1).abs() >= SHIFT))
                kind, matched = "standardized", standardized
                if not bool(matched.any()):
                    for lo in (0.0, -1.0):
                        span = 1.0 - lo
                        ranged = judged & ((low - lo).abs() <= RANGE_TOL * span) & ((high - 1).abs() <= RANGE_TOL * span) \
                            & (((t_low - lo) >= GAP * span) | ((1 - t_high) >= GAP * span))
                        if bool(ranged.any()):
                            kind, matched = f"scaled to [{lo:g}, 1]", ranged
                            break
                if not bool(matched.any()):
                    continue
                k = int(matched.nonzero()[0])
                return {
                    "kind": kind, "features": int(matched.sum()), "judged_features": int(judged.sum()),
                    "feature": k, "train_rows": rows, "train_mean": float(t_mean[k]), "train_std": float(t_std[k]),
                    "train_min": float(t_low[k]), "train_max": float(t_high[k]), "union_mean": float(mean[k]),
                    "union_std": float(std[k]), "union_min": float(low[k]), "union_max": float(high[k]),
                    "others": [self.session.loader_site(other) for other, _ in chosen],
                    "step": self.session.step}
        return None

    def findings(self) -> list:
        f = self.found
        if f is None:
            return []
        where = f["training_loader"]
        sites = sorted({s for s in f["others"] if s})
        splits = f"{plural(len(f['others']), 'other split')}" + \
            (f" (loader{'s' if len(f['others']) > 1 else ''} created at {' and '.join(sites)})" if sites else "")
        if f["kind"] == "standardized":
            seen = (f"mean {f['union_mean']:.3f} and standard deviation {f['union_std']:.3f} over the training split "
                    f"together with {splits}, but mean {f['train_mean']:.3f} and standard deviation "
                    f"{f['train_std']:.3f} over the training split alone")
        else:
            seen = (f"range [{f['union_min']:.3g}, {f['union_max']:.3g}] over the training split together with "
                    f"{splits}, but [{f['train_min']:.3g}, {f['train_max']:.3g}] over the training split alone")
        message = (f"the data was {f['kind']} with statistics of all splits before it was split: feature {f['feature']} "
                   f"of the training data{f' (loader created at {where})' if where else ''} has {seen} "
                   f"({f['features']} of {f['judged_features']} varying features alike, {f['train_rows']} training "
                   f"values each): the held-out splits' level and spread leaked into the training inputs, and "
                   f"validation scores are measured on data scaled with its own statistics. Fit the scaler on the "
                   f"training split only and apply it unchanged to the others")
        evidence = {k: v for k, v in f.items() if k != "step"}
        return [self.finding(message, where=where, step=f["step"], evidence=evidence)]

