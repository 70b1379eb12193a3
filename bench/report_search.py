"""Whole reports, the differential and the scope note of `kb search`, measured on real reports.

For each labelled file (default: the real-report dev split):

- the reports that carry a `report:` (the first post as pasted: prose, code, traceback, log), ranked
  three ways: by the `query:` extract alone (text only, as before), by the whole report as one
  query, and by the whole report read by parts (`kb search -`: kb lint on the code, the KB's error
  messages on the error lines, the log signatures), with 95% bootstrap intervals;
- what the evidence readers found: reports with a lint, message or log finding, and how many of
  those name an acceptable entry;
- the differential on every `query:` of the file: how many get a tell-apart group, and in those,
  how often the first hit is right and how often the group holds the answer;
- the scope note: in-scope reports wrongly marked out of scope.

Then tests/real_reports/out_of_scope.yaml, per split: the share marked out of scope.

    python bench/report_search.py [FILE ...]
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import yaml  # noqa: E402

from search_quality import interval, metrics  # noqa: E402
from kb_tools.core.load import load_kb  # noqa: E402
from kb_tools.lint import lint_text  # noqa: E402
from kb_tools.search import report as reports  # noqa: E402
from kb_tools.search.answer import answer  # noqa: E402
from kb_tools.search.evaluate import load_queries, side  # noqa: E402
from kb_tools.search.index import build_index  # noqa: E402
from kb_tools.search.rank import rank  # noqa: E402

DEPTH = 10
OUT_OF_SCOPE = os.path.join(ROOT, "tests", "real_reports", "out_of_scope.yaml")


def found_at(ids: list, expect: list):
    return next((n for n, e in enumerate(ids, 1) if e in expect), None)


def row(name: str, found: list) -> str:
    m = metrics(found)
    cells = [f"{m[k]:.3f} [{lo:.2f}, {hi:.2f}]" for k in ("hit@1", "hit@3", "mrr") for lo, hi in [interval(found, k)]]
    return f"| {name} | " + " | ".join(cells) + " |"


def whole_reports(index, queries: list) -> None:
    with_report = [q for q in queries if q.get("report")]
    if not with_report:
        print("no report: fields in this file")
        return
    text_only, as_one, by_parts, evidence = [], [], [], {"any": 0, "right": 0, "lint": 0, "message": 0, "log": 0}
    for q in with_report:
        text_only.append(found_at([h.id for h in rank(index, q["query"], DEPTH)], q["expect"]))
        as_one.append(found_at([h.id for h in rank(index, " ".join(q["report"].split())[:10_000], DEPTH)],
                               q["expect"]))
        result = answer(index, q["report"], DEPTH, lint_source=lint_text)
        by_parts.append(found_at([h.id for h in result.hits], q["expect"]))
        if result.evidence:
            evidence["any"] += 1
            evidence["right"] += any(e in q["expect"] for e in result.evidence)
            for kind in {k for items in result.evidence.values() for k, _ in items}:
                evidence[kind] += 1
    print(f"{len(with_report)} of {len(queries)} reports carry a whole report\n")
    print("| ranked by | hit@1 | hit@3 | MRR |")
    print("|---|---|---|---|")
    print(row("the query: extract (text only)", text_only))
    print(row("the whole report as one query", as_one))
    print(row("the whole report read by parts (kb search -)", by_parts))
    print(f"\nevidence beside the words in {evidence['any']} reports (lint {evidence['lint']}, error message "
          f"{evidence['message']}, log signature {evidence['log']}); it names an acceptable entry in {evidence['right']}")


def differential(index, queries: list) -> None:
    groups = first_right = in_group = scoped = 0
    for q in queries:
        result = answer(index, q["query"], DEPTH)
        scoped += bool(result.scope)
        if result.tell_apart:
            groups += 1
            first_right += result.hits[0].id in q["expect"]
            in_group += any(e in q["expect"] for e in result.tell_apart)
    print(f"\ndifferential: {groups} of {len(queries)} queries get a tell-apart group; in those the first hit is "
          f"right for {first_right}, the group holds the answer for {in_group}")
    print(f"scope note on in-scope queries (false): {scoped} of {len(queries)}")


def out_of_scope(index) -> None:
    with open(OUT_OF_SCOPE, encoding="utf-8") as fh:
        items = yaml.safe_load(fh)["queries"]
    for split in ("dev", "test"):
        part = [q for q in items if side(q["source"]) == split]
        marked = [q for q in part if answer(index, q["query"], DEPTH).scope]
        print(f"out_of_scope.yaml {split}: {len(marked)} of {len(part)} marked out of scope")
        for q in part:
            if q not in marked:
                print(f"    not marked ({q['topic']}): {q['query'][:100]!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", default=[os.path.join(ROOT, "tests", "real_reports", "dev.yaml")])
    args = parser.parse_args()
    index = build_index(load_kb(use_cache=False))
    for path in args.files:
        print(f"\n## {os.path.relpath(path, ROOT)}\n")
        queries = load_queries(path)
        whole_reports(index, queries)
        differential(index, queries)
    print()
    out_of_scope(index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
