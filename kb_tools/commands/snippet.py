"""`kb snippet`: only an entry's runnable code, so that `kb snippet ID | python` runs it."""
from __future__ import annotations

import sys

from kb_tools.commands.common import entry_named, load_kb_checked
from kb_tools.commands.output import EXIT_OK

NAME = "snippet"
SUMMARY = "only the entry's runnable code (pipe it to python)"
DESCRIPTION = None


def run(args) -> int:
    """Only the entry's runnable code, so `kb snippet ID | python` runs it."""
    kb = load_kb_checked(args)
    sys.stdout.write(entry_named(kb, args.id).snippet)
    return EXIT_OK


def add_arguments(p):
    p.add_argument("id", help="entry id or alias")
