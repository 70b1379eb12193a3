"""`kb context`: the best entries for a query as compact Markdown for a model's context window."""
from __future__ import annotations

import sys

from kb_tools.commands.common import add_json_option, load_kb_checked
from kb_tools.commands.output import EXIT_OK, print_json, query_text
from kb_tools.core.model import AREAS
from kb_tools.core.util import UsageError



NAME = "context"
SUMMARY = "the best entries for a query as Markdown for a model's context window"
DESCRIPTION = ("The entries `kb search` ranks first for the query, as compact Markdown (title, the symptom that "
    "matched, cause, fix, check, and the snippet when there is room), trimmed to a token budget with "
    "the most relevant first.")


def run(args) -> int:
    """The best entries for a query (or for a `kb watch` report's findings) as compact Markdown for
    a model's context window."""
    from kb_tools.render.agents import context, context_from_watch
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    query = query_text(args.query) if args.query else ""
    if args.from_watch:
        from kb_tools.watch.report import read_report  # plain data: no torch
        if query.strip():
            raise UsageError("context: give a query or --from-watch REPORT, not both")
        report = read_report(args.from_watch)
        result = context_from_watch(load_kb_checked(args), report, budget=args.budget, limit=args.limit,
                                    area=args.area)
    elif not query.strip():
        raise UsageError("context: empty query: give what the run shows, or --from-watch REPORT")
    else:
        result = context(args.kb, query, budget=args.budget, limit=args.limit, area=args.area)
    if args.json:
        print_json(result)
    else:
        sys.stdout.write(result["markdown"])
    return EXIT_OK


def add_arguments(p):
    p.add_argument("query", nargs="*", help="what the run shows; - reads it from standard input")
    p.add_argument("--from-watch", metavar="REPORT", help="instead of a query: the entries for what `kb watch` "
                   "found, from the JSON REPORT that kb watch --report (or --json) wrote (- reads standard input)")
    p.add_argument("--budget", type=int, default=1500, metavar="TOKENS",
                   help="at most this many tokens (estimated at 4 characters each; default 1500)")
    p.add_argument("--limit", "-n", type=int, default=5, help="at most this many entries (default 5)")
    p.add_argument("--area", choices=AREAS, help="only entries of this area")
    add_json_option(p, "the Markdown with the entries it holds and its token estimate")
