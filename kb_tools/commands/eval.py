"""`kb eval`: hit@1, hit@3 and MRR of the search ranking on labelled queries, and each miss."""
from __future__ import annotations

import os
import sys

from kb_tools.commands.common import add_json_option, load_kb_checked
from kb_tools.commands.output import EXIT_OK, print_json
from kb_tools.core.util import KBError



NAME = "eval"
SUMMARY = "score the search ranking on labelled queries"
DESCRIPTION = ("hit@1, hit@3 and MRR of `kb search` on a YAML "
    "file of labelled queries, then each miss with what ranked above the right answer.")


def run(args) -> int:
    """Score the search ranking on labelled queries: hit@1, hit@3, MRR, and each miss."""
    from kb_tools.search.index import build_index
    from kb_tools.search.evaluate import evaluate, load_queries
    kb = load_kb_checked(args)
    path = args.queries or os.path.join(os.path.dirname(kb.root), "tests", "queries.yaml")
    if not args.queries and not os.path.isfile(path):
        raise KBError(f"no labelled queries at {path} (they ship with a checkout, not with the package): "
                      f"pass a file, `kb eval QUERIES.yaml`")
    queries = load_queries(path)
    report = evaluate(build_index(kb), queries)
    if args.json:
        print_json(report)
    else:
        print(f"{report['queries']} queries: hit@1 {report['hit@1']:.3f}  hit@3 {report['hit@3']:.3f}  "
              f"MRR {report['mrr']:.3f}")
        for miss in report["misses"]:
            where = f"rank {miss['rank']}" if miss["rank"] else "not in top 10"
            print(f"- [{miss['kind']}] {miss['query'][:90]!r}: {miss['expect'][0]} at {where}; "
                  f"above it: {', '.join(miss['above']) or '-'}")
    if report["unknown_ids"]:
        print(f"warning: labels name entries this KB lacks: {', '.join(report['unknown_ids'])}", file=sys.stderr)
    return EXIT_OK


def add_arguments(p):
    p.add_argument("queries", nargs="?", help="queries file (default: tests/queries.yaml of this checkout)")
    add_json_option(p, "metrics and misses")
