"""`kb verify`: every quote checked against its cached source or installed package (kb_tools/verify)."""
from __future__ import annotations

import os
import sys

from kb_tools.commands.common import add_json_option, load_kb_checked, refuse_bundled
from kb_tools.commands.output import EXIT_FAIL, EXIT_OK, print_json, style



NAME = "verify"
SUMMARY = "check every quote against its source; exit 1 on any defect"
DESCRIPTION = ("Check that every quote is verbatim in its cached source, on exactly the cited lines, or in the "
    "docstring of the installed package's object. Formatting (line breaks, spaces, emphasis, curly "
    "quotes, ... vs the ellipsis character) does not count; [...] marks an elision.")


def run(args) -> int:
    """Check every quote against its cached source or installed package; exit 1 on any defect."""
    from kb_tools.verify.quotes import fix_lines, verify_kb
    kb = load_kb_checked(args, require_clean=False)
    # a quote file or source that does not parse would silently drop its quotes: fail on it here
    broken = [p for p in kb.problems if "/entries/" not in "/" + p.path.replace(os.sep, "/")]
    report = verify_kb(kb)
    fixed = []
    if args.fix_lines and any(d.kind == "wrong-lines" for d in report.defects):
        refuse_bundled(kb.root)
        refused = []
        fixed = fix_lines(kb, report, refused)
        for rel, reason in refused:
            print(f"kb: did not fix lines in {rel}: {reason}", file=sys.stderr)
        kb = load_kb_checked(args, require_clean=False)
        report = verify_kb(kb)
        broken = [p for p in kb.problems if "/entries/" not in "/" + p.path.replace(os.sep, "/")]
    ok = report.ok(args.strict) and not broken
    if args.json:
        out = report.to_dict(args.strict)
        out["ok"] = ok
        out["problems"] = [str(p) for p in broken]
        out["fixed_files"] = fixed
        print_json(out)
        return EXIT_OK if ok else EXIT_FAIL
    for rel in fixed:
        print(f"fixed lines in {rel}")
    for p in broken:
        print(p)
    for d in report.defects + report.unchecked:
        print(str(d).replace(f": {d.kind}: ", f": {style(d.kind, '1;31' if d.kind != 'unchecked' else '33')}: ", 1))
    versions = ", ".join(f"{name} {v or 'not installed'}" for name, v in sorted(report.packages.items()))
    print(f"{report.quotes} quotes: {report.passed} verbatim, {report.failed} failed, "
          f"{len(report.unchecked)} unchecked" + (" (--strict: fails)" if args.strict and report.unchecked else "")
          + (f"; package quotes checked against {versions}" if versions else "")
          + f"; {report.sources} source hashes checked"
          + (f", {report.sources_changed} changed" if report.sources_changed else "")
          + f" [{report.seconds * 1000:.0f} ms]")
    return EXIT_OK if ok else EXIT_FAIL


def add_arguments(p):
    add_json_option(p, "the report")
    p.add_argument("--strict", action="store_true", help="also fail on quotes that cannot be checked here "
                                                         "(their package is not installed)")
    p.add_argument("--fix-lines", action="store_true", help="rewrite wrong `lines:` values in place, "
                                                            "changing nothing else, then report")
