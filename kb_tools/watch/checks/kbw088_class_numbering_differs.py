"""KBW088: the training data and the evaluation data number their classes differently: each split
built its own label map (folders in listing order, labels in order of first appearance, a
category list in file order), so a class the model learned as k is scored as another index.

Criterion: when a DataLoader's role is settled (checks.loaders.LoaderRoles), the label maps of its
dataset (and of the datasets it wraps: Subset, ConcatDataset) are compared with those of every
dataset of the other role seen so far. A label map is an attribute named as one
(`class_to_idx`, `label2id`, `idx_to_class`, `json_category_id_to_contiguous_id`, `classes`, ...:
MAP_NAME), holding a dict of at least 2 entries whose keys are strings or integers and whose values
are distinct (an index map: integers from 0 to its length + 1, or the names of an inverse map), or a
list of at least 2 distinct strings (its order numbers the classes); a fitted label encoder held by
the dataset counts by its `classes_`. The splits disagree when two maps of one name share at least 2
keys and map one of them to different values, or when two lists hold the same names in another
order. A validation map that holds fewer classes than training but numbers them as training does
is silent, as are per-split tables that number nothing (counts, weights). A loader whose role settles
only at the end of the run (an evaluation of two batches that ends the script) is compared then.
"""
from __future__ import annotations

import re

from torch.utils.data import Dataset

from kb_tools.watch.checks.loaders import LoaderRoleCheck, attribute_walk

MAP_NAME = re.compile(
    r"^_?(?:(?:class(?:es)?|labels?|cat(?:egory|egories)?|tags?|json_category_id)_?(?:2|to_)"
    r"(?:id|idx|index|label|contiguous_id)s?"
    r"|(?:ids?|idx|index|contiguous_category_id)_?(?:2|to_)(?:class(?:es)?|labels?|cat(?:egory)?|tags?|json_id)"
    r"|classes|class_names|categories|label_names|label_map|class_map)$", re.I)
MAX_DATASETS = 4
MAX_ENTRIES = 100_000   # a map larger than this is not compared


class ClassNumberingDiffers(LoaderRoleCheck):
    __doc__ = __doc__
    code = "KBW088"
    name = "class-numbering-differs"
    entry = "class-index-mismatch"
    title = "the training and evaluation datasets number their classes differently"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.seen: dict = {"training": [], "evaluation": []}   # role -> [(id of the dataset, loader site, maps)]
        self.found: dict = {}   # (training site, evaluation site) -> (step, evidence)

    def on_loader_role(self, role, loader):
        dataset = getattr(loader, "dataset", None)
        mine = self.seen[role]
        if dataset is None or len(mine) >= MAX_DATASETS or any(seen == id(dataset) for seen, _, _ in mine):
            return
        maps = label_maps(dataset)
        if not maps:
            return
        site = self.session.loader_site(loader)
        mine.append((id(dataset), site, maps))
        other = "evaluation" if role == "training" else "training"
        for _, other_site, other_maps in self.seen[other]:
            train, evaluation = (maps, other_maps) if role == "training" else (other_maps, maps)
            sites = (site, other_site) if role == "training" else (other_site, site)
            evidence = disagreement(train, evaluation)
            if evidence is not None and sites not in self.found:
                self.found[sites] = (self.session.step, evidence)

    def findings(self) -> list:
        out = []
        for (train_site, eval_site), (step, ev) in self.found.items():
            if ev["kind"] == "map":
                what = (f"`{ev['name']}` maps {ev['key']!r} to {ev['training']!r} in the training data and to "
                        f"{ev['evaluation']!r} in the evaluation data ({ev['differ']} of {ev['shared']} shared "
                        f"entries differ)")
            else:
                what = (f"`{ev['name']}` lists the same {ev['shared']} names in another order (from position "
                        f"{ev['from']}: {ev['training'][:4]} in training, {ev['evaluation'][:4]} in evaluation)")
            where = f"; training loader created at {train_site or '?'}, evaluation loader at {eval_site or '?'}"
            message = (f"{what}{where}: each split built its own label map, so the model is scored against "
                       f"another numbering than it learned. Build the map once (sorted class names, or the "
                       f"training split's map) and give it to every split")
            out.append(self.finding(message, where=eval_site, step=step, evidence=ev))
        return out


def label_maps(dataset) -> dict:
    """{attribute name: dict or list} of the label maps a dataset and the datasets it wraps hold."""
    def follow(name, value):
        return name in ("dataset", "datasets") or (name.startswith("[") and isinstance(value, Dataset))
    maps: dict = {}
    for _, name, value in attribute_walk(dataset, follow, max_objects=16):
        if follow(name, value) or name.startswith("["):
            continue
        classes = getattr(value, "classes_", None)   # a fitted label encoder
        if classes is not None and not isinstance(value, (dict, list, tuple)):
            value, name = list(classes)[:MAX_ENTRIES + 1], f"{name}.classes_"
        elif not MAP_NAME.match(name):
            continue
        found = _as_map(value)
        if found is not None and name not in maps:
            maps[name] = found
    return maps


def _as_map(value):
    if isinstance(value, dict):
        if not 2 <= len(value) <= MAX_ENTRIES:
            return None
        keys, values = list(value), list(value.values())
        if not all(isinstance(k, (str, int)) for k in keys) or len(set(map(_plain, values))) < len(values):
            return None
        if all(isinstance(v, int) for v in values):
            return dict(value) if min(values) >= 0 and max(values) <= len(values) + 1 else None
        return dict(value) if all(isinstance(v, str) for v in values) else None
    if isinstance(value, (list, tuple)) and 2 <= len(value) <= MAX_ENTRIES:
        names = [_plain(v) for v in value]
        if all(isinstance(v, str) for v in names) and len(set(names)) == len(names):
            return names
    return None


def _plain(value):
    """A NumPy scalar as its Python value (a label encoder's classes_ holds them)."""
    if isinstance(value, str):
        return str(value)
    item = getattr(value, "item", None)
    return item() if callable(item) and not isinstance(value, (int, float)) else value


def disagreement(train: dict, evaluation: dict):
    """The first label map the two splits both hold and number differently, as evidence; None if
    they agree."""
    for name, a in train.items():
        b = evaluation.get(name)
        if isinstance(a, dict) and isinstance(b, dict):
            shared = [k for k in a if k in b]
            differ = [k for k in shared if a[k] != b[k]]
            if len(shared) >= 2 and differ:
                return {"kind": "map", "name": name, "shared": len(shared), "differ": len(differ),
                        "key": differ[0], "training": a[differ[0]], "evaluation": b[differ[0]]}
        elif isinstance(a, list) and isinstance(b, list) and a != b and sorted(a) == sorted(b):
            first = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)   # the report shows where they part
            return {"kind": "order", "name": name, "shared": len(a), "from": first,
                    "training": a[first:first + 20], "evaluation": b[first:first + 20]}
    return None
