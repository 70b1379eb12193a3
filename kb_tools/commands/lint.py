"""`kb lint`: the KB's mistakes found in training scripts by reading their code (kb_tools/lint)."""
from __future__ import annotations

import sys

from kb_tools.commands.common import add_json_option
from kb_tools.commands.output import EXIT_FAIL, EXIT_OK, print_json, style
from kb_tools.core.util import UsageError



NAME = "lint"
SUMMARY = "find the KB's mistakes in training scripts; exit 1 when found"
DESCRIPTION = ("Read Python training scripts and report the mistakes of the KB's entries that are visible in the "
    "code, as path:line:col: CODE message (kb show ENTRY). Exit 0 clean, 1 findings, 2 usage or an "
    "unreadable or unparsable file. Files given together (a folder, several paths) are read as one "
    "project: a call into another of them is followed. Silence a line with `# kb: noqa` or "
    "`# kb: noqa[KBL001]`.")


def run(args) -> int:
    """Find the KB's mistakes in training scripts; exit 1 when something is found."""
    from kb_tools.lint.engine import RULES, lint_paths, python_files
    def split(value):
        return [c.strip() for c in value.split(",") if c.strip()] if value else None
    if args.list_rules:
        rows = [{"code": code, "name": name, "entry": entry} for code, (name, entry, _) in RULES.items()]
        if args.json:
            print_json(rows)
        else:
            for r in rows:
                print(f"{r['code']}  {r['name']:<38} kb show {r['entry']}")
        return EXIT_OK
    if not args.paths:
        raise UsageError("lint: name the scripts or folders to check (or --list-rules)")
    files = python_files(args.paths, stdin=True)
    if not files:  # as ruff does: a clean exit, but not a silent one, when there was nothing to check
        print(f"kb lint: no Python files under {', '.join(args.paths)}", file=sys.stderr)
    findings = lint_paths(files, split(args.select), split(args.ignore), stdin=True)
    if args.json:
        print_json([f.to_dict() for f in findings])
    else:
        for f in findings:
            print(str(f).replace(f" {f.code} ", f" {style(f.code, '1;31')} ", 1))
        if findings:
            print(f"{len(findings)} finding{'s' if len(findings) != 1 else ''}", file=sys.stderr)
    return EXIT_FAIL if findings else EXIT_OK


def add_arguments(p):
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="Python files, or folders to search for them; - reads one script from standard input")
    p.add_argument("--select", metavar="CODES", help="only these rules (comma-separated codes or prefixes)")
    p.add_argument("--ignore", metavar="CODES", help="skip these rules (comma-separated codes or prefixes)")
    p.add_argument("--list-rules", action="store_true", help="every rule: code, name, the entry it detects")
    add_json_option(p, "the findings (path, line, col, code, name, message, entry)")
