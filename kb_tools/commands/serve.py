"""`kb serve`: the docs site previewed with live reload; pages follow edits to the KB."""
from __future__ import annotations

import sys

from kb_tools.commands.common import load_kb_checked
from kb_tools.commands.output import EXIT_OK

NAME = "serve"
SUMMARY = "preview the docs site with live reload"
DESCRIPTION = None


def run(args) -> int:
    """Preview the docs site with live reload; pages follow edits to the KB."""
    from kb_tools.site.build import serve_site
    load_kb_checked(args)  # fail early, in one line, on an invalid KB
    serve_site(args.kb, work_dir=args.work, results_path=args.results, dev_addr=args.dev_addr,
               log=lambda msg: print(msg, file=sys.stderr))
    return EXIT_OK


def add_arguments(p):
    p.add_argument("--dev-addr", default="127.0.0.1:8000", metavar="HOST:PORT", help="address to serve on")
    p.add_argument("--work", metavar="DIR", help="where generated pages go (default: build/site/)")
    p.add_argument("--results", metavar="FILE", help="verified snippet runs (default: kb/verified/results.json)")
