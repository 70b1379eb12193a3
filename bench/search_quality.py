"""Search quality on the labelled queries: this project's ranking against two baselines.

All three rankers see the same entries and the same queries in one run:
- `kb rank`: kb_tools.search.rank (synonym concepts, field-weighted BM25, symptom-line bonus);
- `rapidfuzz`: the first ranking (best weighted WRatio over fields), kept as search.rank_fuzzy;
- `BM25`: rank_bm25's BM25Okapi over each entry's title, aliases, tags, symptoms, cause and fix
  (a benchmark-only dependency: `pip install rank-bm25`).

    python bench/search_quality.py [QUERIES] [--markdown]
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kb_tools.load import load_kb  # noqa: E402
from kb_tools.search import build_index, evaluate, load_queries, rank, rank_fuzzy  # noqa: E402


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("queries", nargs="?", default=os.path.join(ROOT, "tests", "queries.yaml"))
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown")
    args = parser.parse_args()

    kb = load_kb(use_cache=False)
    index = build_index(kb)
    queries = load_queries(args.queries)
    rankers = {
        "kb rank": lambda q, k: [h.id for h in rank(index, q, k)],
        "rapidfuzz": lambda q, k: [h.id for h in rank_fuzzy(kb.entries.values(), q, k)],
        "BM25": bm25_ranker(kb),
    }
    rows = []
    for name, ranker in rankers.items():
        start = time.perf_counter()
        report = evaluate(index, queries, ranker)
        per_query_ms = (time.perf_counter() - start) * 1000 / max(report["queries"], 1)
        rows.append((name, report, per_query_ms))
    kinds = sorted({q.get("kind", "") for q in queries})
    print(f"{len(queries)} queries over {len(kb.entries)} entries ({args.queries})\n")
    head = ["ranker", "hit@1", "hit@3", "MRR"] + [f"hit@3 {k}" for k in kinds] + ["ms/query"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, report, ms in rows:
        by_kind = []
        for kind in kinds:
            subset = [q for q in queries if q.get("kind", "") == kind]
            by_kind.append(f"{evaluate(index, subset, rankers[name])['hit@3']:.2f}")
        print(f"| {name} | {report['hit@1']:.3f} | {report['hit@3']:.3f} | {report['mrr']:.3f} | "
              + " | ".join(by_kind) + f" | {ms:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
