"""`kb list`: every entry, one line each, by area."""
from __future__ import annotations

from kb_tools.commands.common import add_json_option, load_kb_checked
from kb_tools.commands.output import EXIT_OK, print_json
from kb_tools.core.model import AREAS

NAME = "list"
SUMMARY = "every entry, one line each"
DESCRIPTION = None


def run(args) -> int:
    """Every entry, one line each, by area."""
    kb = load_kb_checked(args)
    entries = [e for e in kb.entries.values() if args.area is None or e.area == args.area]
    if args.json:
        print_json([{"id": e.id, "title": e.title, "area": e.area} for e in entries])
        return EXIT_OK
    width = max((len(e.id) for e in entries), default=0)
    for e in sorted(entries, key=lambda e: (AREAS.index(e.area) if e.area in AREAS else 99, e.id)):
        print(f"{e.area:<12} {e.id.ljust(width)}  {e.title}")
    return EXIT_OK


def add_arguments(p):
    p.add_argument("--area", choices=AREAS, help="only this area")
    add_json_option(p, "id, title and area of each entry")
