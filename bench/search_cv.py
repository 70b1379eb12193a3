"""Would re-tuning the ranking's constants on the dev split pay? 5-fold cross-validation says.

For every setting of a small grid (symptom-line bonus, the lexical side's share of the
fused score, the dense side's baseline rank), each dev query's reciprocal rank is computed
once; then, per fold, the setting best on the other four folds is scored on the held-out fold. If that
held-out MRR is below what the current constants score on the same folds, a
re-tune would be fitting the dev split's noise.

    python bench/search_cv.py [tests/real_reports/dev.yaml]
"""
from __future__ import annotations

import functools
import itertools
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kb_tools.search import embedders  # noqa: E402
from kb_tools.search import evaluate as search_evaluate  # noqa: E402
from kb_tools.search import index as search_index  # noqa: E402
from kb_tools.search import rank as search_rank  # noqa: E402
from kb_tools.core.load import load_kb  # noqa: E402

GRID = {"LINE_BONUS": (3.0, 6.0, 10.0), "LEXICAL_SHARE": (0.3, 0.4, 0.5, 0.6, 0.7), "DENSE_BASELINE_RANK": (5, 10, 20, 40)}
FOLDS = 5


def reciprocal_ranks(index, queries) -> list:
    out = []
    for q in queries:
        ids = [h.id for h in search_rank.rank(index, q["query"], 10)]
        out.append(next((1 / n for n, eid in enumerate(ids, 1) if eid in q["expect"]), 0.0))
    return out


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "real_reports", "dev.yaml")
    queries = search_evaluate.load_queries(path)
    index = search_index.build_index(load_kb(os.path.join(ROOT, "kb")))
    embedder = embedders.load()
    if embedder is not None:  # a query's vector does not depend on the grid: embed each query once
        embedder.encode_query = functools.lru_cache(maxsize=None)(embedder.encode_query)
    current = tuple(getattr(search_rank, name) for name in GRID)
    settings = sorted(set(itertools.product(*GRID.values())) | {current})
    rr = {}
    for n, values in enumerate(settings, 1):
        for name, value in zip(GRID, values):
            setattr(search_rank, name, value)
        rr[values] = reciprocal_ranks(index, queries)
        print(f"\r{n}/{len(settings)} settings", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    order = list(range(len(queries)))
    random.Random(0).shuffle(order)
    folds = [order[i::FOLDS] for i in range(FOLDS)]
    tuned, kept = [], []
    for held in folds:
        rest = set(order) - set(held)
        best = max(settings, key=lambda s: sum(rr[s][i] for i in rest))
        tuned.append(sum(rr[best][i] for i in held) / len(held))
        kept.append(sum(rr[current][i] for i in held) / len(held))
        print(f"fold of {len(held)}: best on the rest {dict(zip(GRID, best))}")
    print(f"held-out MRR, re-tuned per fold: {sum(tuned) / FOLDS:.3f}; current constants: {sum(kept) / FOLDS:.3f}")
    best = max(settings, key=lambda s: sum(rr[s]))
    print(f"best on the whole split (in-sample, optimistic): {dict(zip(GRID, best))} "
          f"MRR {sum(rr[best]) / len(queries):.3f} vs current {sum(rr[current]) / len(queries):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
