"""`kb context`: the best entries for a query as compact Markdown for a model's context window."""
from __future__ import annotations

import sys

from kb_tools.commands.common import add_json_option
from kb_tools.commands.output import EXIT_OK, print_json, query_text
from kb_tools.core.model import AREAS
from kb_tools.core.util import UsageError



NAME = "context"
SUMMARY = "the best entries for a query as Markdown for a model's context window"
DESCRIPTION = ("The entries `kb search` ranks first for the query, as compact Markdown (title, the symptom that "
    "matched, cause, fix, check, and the snippet when there is room), trimmed to a token budget with "
    "the most relevant first.")


def run(args) -> int:
    """The best entries for a query as compact Markdown for a model's context window."""
    from kb_tools.render.agents import context
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    result = context(args.kb, query_text(args.query), budget=args.budget, limit=args.limit, area=args.area)
    if args.json:
        print_json(result)
    else:
        sys.stdout.write(result["markdown"])
    return EXIT_OK


def add_arguments(p):
    p.add_argument("query", nargs="+", help="what the run shows; - reads it from standard input")
    p.add_argument("--budget", type=int, default=1500, metavar="TOKENS",
                   help="at most this many tokens (estimated at 4 characters each; default 1500)")
    p.add_argument("--limit", "-n", type=int, default=5, help="at most this many entries (default 5)")
    p.add_argument("--area", choices=AREAS, help="only entries of this area")
    add_json_option(p, "the Markdown with the entries it holds and its token estimate")
