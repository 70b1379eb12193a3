"""KBW087: an evaluation loader's dataset gives a different item each time the same index is read:
random training augmentation (crops, flips, jitter, mixup) is still applied to evaluation data.

Criterion: once a DataLoader is an evaluation loader (checks.loaders.LoaderRoles: batches followed
by model calls under no_grad or in eval mode, never by a backward()), its dataset (map-style, once
per dataset object) is read directly: READS reads of each of INDICES indices spread over it, none
of them watched, with the global torch, Python and NumPy random states restored after. The dataset
augments when a part of an item (at least MIN_VALUES numbers) differs between reads of one index
and either another part of the item (the label) never changes, or, when every part changes (mixup
mixes the labels too), the reads of one index correlate more with each other than items of
different indices do (mean Pearson r higher by at least MARGIN and 4/sqrt(values), for parts of at
least MIN_COMPARED numbers and one shape: the same item, altered). A dataset that draws fresh
random data, labels included, on every read is thereby left alone, as are items holding two
same-shaped inputs (views drawn on purpose for contrastive learning). A random generator of the
user's own (a `torch.Generator` a transform holds) is advanced by the reads. The reads stop,
unjudged, past BUDGET_S seconds, and a part of more than MAX_PART_VALUES values is kept as an even
sample of them.
"""
from __future__ import annotations

import itertools
import sys

import torch

from kb_tools.watch.checks.loaders import LoaderRoleCheck, attribute_walk, read_unwatched

INDICES = 3
READS = 3
MIN_VALUES = 8
MIN_COMPARED = 256   # values in a part compared by correlation: fewer, and random draws can correlate by chance
MARGIN = 0.1
MAX_DATASETS = 8
BUDGET_S = 5.0           # the reads of one dataset stop, unjudged, past this many seconds
MAX_PART_VALUES = 1 << 20   # a larger part is kept as an even sample of this many of its values
AUGMENTATIONS = ("ColorJitter", "RandAugment", "AutoAugment", "TrivialAugmentWide", "AugMix", "GaussianBlur",
                 "ElasticTransform", "Mixup", "MixUp", "CutMix", "Cutout", "SpecAugment")
TRANSFORM_ATTRIBUTES = ("dataset", "datasets", "transform", "transforms", "augment", "augmentation", "mixup")


class EvaluationDataRandom(LoaderRoleCheck):
    __doc__ = __doc__
    code = "KBW087"
    name = "evaluation-data-random"
    entry = "eval-augmentation-on"
    title = "the same evaluation item reads differently each time: training augmentation runs on evaluation data"
    confidence = 0.65

    def __init__(self, session):
        super().__init__(session)
        self.probed: set = set()      # ids of the datasets read
        self.found: dict = {}         # loader site -> [step, evidence, datasets found augmenting]

    def on_loader_role(self, role, loader):
        if role == "evaluation":
            self._probe(loader)

    def _probe(self, loader) -> None:
        dataset = getattr(loader, "dataset", None)
        if dataset is None or id(dataset) in self.probed or len(self.probed) >= MAX_DATASETS \
                or isinstance(dataset, torch.utils.data.IterableDataset) or not hasattr(dataset, "__getitem__"):
            return
        self.probed.add(id(dataset))
        try:
            size = len(dataset)
        except TypeError:
            return
        indices = sorted({size * k // INDICES for k in range(INDICES)}) if size > 0 else []
        reads = read_unwatched(dataset, indices, READS, _leaves, budget_s=BUDGET_S)
        if reads is None:
            return
        verdict = _altered_reads(reads)
        if verdict is not None:
            site = self.session.loader_site(loader)
            if site in self.found:   # a loader built again for each evaluation
                self.found[site][2] += 1
            else:
                self.found[site] = [self.session.step, dict(verdict, dataset=describe(dataset), indices=indices,
                                                            augmentations=random_transforms(dataset)), 1]

    def findings(self) -> list:
        out = []
        for site, (step, ev, datasets) in self.found.items():
            named = f" ({', '.join(ev['augmentations'])})" if ev["augmentations"] else ""
            how = (f"correlation {ev['same_index']:.2f} between the reads, {ev['other_index']:.2f} with other items"
                   if ev["other_index"] is not None else "its other parts, the label, unchanged")
            message = (f"the evaluation loader{f' created at {site}' if site else ''} reads a {ev['dataset']} whose "
                       f"item {ev['indices'][ev['index']]} came back different when read again ({how}"
                       f"{f'; {datasets} such datasets' if datasets > 1 else ''}): random augmentation{named} runs "
                       f"on evaluation data, so each evaluation scores other random versions of the inputs. Give "
                       f"the evaluation split a dataset object of its own whose preprocessing draws nothing at "
                       f"random (resize, centre crop, normalize)")
            out.append(self.finding(message, where=site, step=step, evidence=dict(ev, datasets=datasets)))
        return out


def _leaves(item, depth: int = 0, out: list | None = None) -> list:
    """The parts of a dataset item in order: tensors, arrays and images as CPU tensors, numbers as
    0-d tensors, anything else as its repr."""
    out = [] if out is None else out
    if len(out) >= 16 or depth > 3:
        return out
    if isinstance(item, torch.Tensor):
        out.append(_bounded(item.detach()).cpu())
    elif isinstance(item, (list, tuple)):
        for value in item[:16]:
            _leaves(value, depth + 1, out)
    elif isinstance(item, dict):
        for key in list(item)[:16]:
            _leaves(item[key], depth + 1, out)
    elif isinstance(item, (bool, int, float)):
        out.append(torch.tensor(float(item), device="cpu"))
    elif hasattr(item, "__array_interface__") or type(item).__module__.startswith("numpy"):
        numpy = sys.modules.get("numpy")
        out.append(_bounded(torch.as_tensor(numpy.asarray(item).copy(), device="cpu")) if numpy is not None
                   else repr(item))
    else:
        out.append(repr(item)[:200])
    return out


def _bounded(t: torch.Tensor) -> torch.Tensor:
    """A part as kept: whole, or for one of more than MAX_PART_VALUES values (a 3-D volume) an even
    sample of them, the same positions on every read, so nine reads stay small."""
    if t.numel() <= MAX_PART_VALUES:
        return t
    return t.reshape(-1)[:: -(-t.numel() // MAX_PART_VALUES)].clone()


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b) or (
            a.is_floating_point() and torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))))
    return a == b


def _numbers(t) -> bool:
    return isinstance(t, torch.Tensor) and t.numel() >= MIN_VALUES and (t.is_floating_point() or t.dtype == torch.uint8)


def _correlation(a, b) -> float:
    """Pearson's r between two parts' values: near 1 for an altered copy of one item (shifted,
    flipped, mixed with others), near 0 for independent random draws whatever their scale."""
    a, b = a.double().flatten(), b.double().flatten()
    a, b = a - a.mean(), b - b.mean()
    scale = float(a.norm() * b.norm())
    return float(a @ b) / scale if scale > 0 else 0.0


def _altered_reads(reads: list):
    """The evidence that reading one index again gave an altered copy of the same item, or None.
    `reads[i][r]` holds the parts of read r of the i-th index."""
    first = reads[0][0]
    if any(len(read) != len(first) for item in reads for read in item):
        return None
    changed = sorted({k for item in reads for read in item[1:] for k in range(len(first))
                      if not _equal(item[0][k], read[k])})
    if not changed:
        return None
    numeric = [t for t in first if _numbers(t)]
    if len(numeric) >= 2 and len({t.shape for t in numeric}) < len(numeric):
        return None   # two same-shaped inputs in one item: views drawn on purpose (contrastive learning)
    index = next(i for i, item in enumerate(reads) if any(not _equal(item[0][k], read[k])
                                                           for read in item[1:] for k in changed))
    kept = len(changed) < len(first)   # the label, say, reads the same every time
    for k in changed:
        parts = [[read[k] for read in item] for item in reads]
        if not all(_numbers(p) for item in parts for p in item):
            continue
        if kept:
            return {"index": index, "part": k, "same_index": None, "other_index": None}
        values = parts[0][0].numel()
        if len(reads) > 1 and len({p.shape for item in parts for p in item}) == 1 and values >= MIN_COMPARED:
            same = _mean([_correlation(a, b) for item in parts for a, b in itertools.combinations(item, 2)])
            apart = _mean([_correlation(a, b) for one, other in itertools.combinations(parts, 2)
                           for a, b in itertools.product(one, other)])
            if same - apart >= max(MARGIN, 4 / values ** 0.5):
                return {"index": index, "part": k, "same_index": same, "other_index": apart}
    return None


def _mean(values: list) -> float:
    return sum(values) / len(values)


def random_transforms(dataset) -> list:
    """Names of the augmentations a dataset holds (torchvision's Random* and their kin), found
    through its dataset, transform and augmentation attributes (`imgaug_transform`, `train_augs`);
    for the message only."""
    def follow(name, value):
        lowered = name.lower()
        return (name in TRANSFORM_ATTRIBUTES or name.startswith("[") or "transform" in lowered or "aug" in lowered) \
            and not isinstance(value, (str, bytes, bool, int, float, torch.Tensor))
    names = []
    for _, name, value in attribute_walk(dataset, follow):
        cls = type(value).__name__
        if follow(name, value) and (cls.startswith("Random") or cls in AUGMENTATIONS) and cls not in names \
                and not isinstance(value, torch.utils.data.Dataset):
            names.append(cls)
    return names[:6]


def describe(dataset) -> str:
    """A dataset's class, with the one it wraps (`Subset of ImageFolder`)."""
    inner = getattr(dataset, "dataset", None)
    name = type(dataset).__name__
    return f"{name} of {type(inner).__name__}" if isinstance(inner, torch.utils.data.Dataset) else name
