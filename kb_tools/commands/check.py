"""`kb check`: validate every entry, quote and source; each problem on one line."""
from __future__ import annotations

import sys

from kb_tools.commands.common import add_json_option, load_kb_checked
from kb_tools.commands.output import EXIT_FAIL, EXIT_OK, print_json

NAME = "check"
SUMMARY = "validate the KB; exit 1 on any problem"
DESCRIPTION = None


def run(args) -> int:
    """Validate every entry, quote and source; print each problem on one line."""
    kb = load_kb_checked(args, require_clean=False)
    for problem in kb.problems:
        print(problem)
    if args.json:
        print_json({"entries": len(kb.entries), "quotes": len(kb.quotes), "sources": len(kb.sources),
                     "problems": [p.to_dict() for p in kb.problems]})
    elif not kb.problems:
        print(f"ok: {len(kb.entries)} entries, {len(kb.quotes)} quotes, {len(kb.sources)} sources")
    else:
        print(f"{len(kb.problems)} problem(s)", file=sys.stderr)
    return EXIT_FAIL if kb.problems else EXIT_OK


def add_arguments(p):
    add_json_option(p, "the counts and every problem")
