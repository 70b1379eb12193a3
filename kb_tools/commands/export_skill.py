"""`kb export-skill`: SKILL.md for agent hosts that load skills, generated from the KB."""
from __future__ import annotations

from kb_tools.commands.common import load_kb_checked
from kb_tools.commands.output import EXIT_OK



NAME = "export-skill"
SUMMARY = "write SKILL.md for agent hosts that load skills"
DESCRIPTION = ("Write DIR/SKILL.md: when to use the KB, how to call kb search and kb context, the first-hour "
    "checklist and every entry, generated from the KB so it cannot drift.")


def run(args) -> int:
    """Write SKILL.md for agent hosts that load skills, generated from the KB."""
    from kb_tools.render.agents import export_skill
    kb = load_kb_checked(args)
    print(f"wrote {export_skill(kb, args.dir)}")
    return EXIT_OK


def add_arguments(p):
    p.add_argument("dir", metavar="DIR", help="folder to write SKILL.md into (created if missing)")
