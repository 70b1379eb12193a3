"""`kb show`: one entry in full, for a terminal (render/text.py) or as JSON (render/sections.py)."""
from __future__ import annotations

import sys

from kb_tools.commands.common import add_json_option, entry_named, load_kb_checked
from kb_tools.commands.output import EXIT_OK, print_json, style

NAME = "show"
SUMMARY = "one entry in full"
DESCRIPTION = None


def run(args) -> int:
    """One entry in full."""
    kb = load_kb_checked(args)
    e = entry_named(kb, args.id)
    if args.json:
        from kb_tools.render.sections import entry_json
        print_json(entry_json(e))
        return EXIT_OK
    from kb_tools.render.text import entry_text
    sys.stdout.write(entry_text(e, style))
    return EXIT_OK


def add_arguments(p):
    p.add_argument("id", help="entry id or alias (e.g. double-softmax or O12)")
    add_json_option(p, "the entry")
