"""`kb search`: rank entries for a symptom, or for what `kb lint` finds in a script (--from-lint), or for
what `kb watch` found in a run (--from-watch REPORT).

On the start-up fast path (fastpath.py runs a plain search through `run` without argparse):
no argparse, re or json here, and the KB's parser and schema only when a command needs them."""
from __future__ import annotations

import sys

from kb_tools.commands.common import load_kb_checked
from kb_tools.commands.output import EXIT_FAIL, EXIT_OK, fail_if_invalid, print_json, query_text, style
from kb_tools.core.util import UsageError, plural

NAME = "search"
SUMMARY = "rank entries for a symptom"
DESCRIPTION = ("Rank entries for what you see: two words (\"loss flat\"), an error message, a paragraph, or a "
               "whole report on standard input (kb search - < issue.md: its code goes through kb lint, its "
               "error lines are matched to the KB's messages, its log lines are read for loss and lr signatures). "
               "When the first entries are too close to call, each gets a \"tell apart\" check.")

# kb search's options: (flags, attribute, value type or "flag", default, help). "area" values are model.AREAS.
SEARCH_OPTIONS = (
    (("--limit", "-n"), "limit", int, 10, "at most this many results (default 10)"),
    (("--area",), "area", "area", None, "only entries of this area"),
    (("--tag",), "tag", str, None, "only entries with this tag"),
    (("--json",), "json", "flag", False, "a JSON array: id, title, area, score, matched, low_confidence; "
     "tell_apart (the check that separates close leaders), evidence (what a pasted report showed), "
     "out_of_scope (what the KB covers)"),
    (("--lexical",), "lexical", "flag", False,
     "rank by words only (BM25 with synonyms), without the sentence embeddings"),
    (("--from-lint",), "from_lint", str, None,
     "instead of a query: the entries for what `kb lint` finds in FILE (- reads standard input)"),
    (("--from-watch",), "from_watch", str, None,
     "instead of a query: the entries for what `kb watch` found in a run, from the JSON REPORT that "
     "kb watch --report (or --json) wrote (- reads standard input)"),
)



def run(args) -> int:
    """Rank entries for a symptom query."""
    from kb_tools.search.answer import answer
    from kb_tools.search.index import dense_unavailable, load_index
    query = query_text(args.query)
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    if args.from_lint and args.from_watch:
        raise UsageError("search: give --from-lint FILE or --from-watch REPORT, not both")
    if args.from_lint:
        return search_from_lint(args, query)
    if args.from_watch:
        return search_from_watch(args, query)
    if not query.strip():
        raise UsageError("empty query: describe what you see, e.g. kb search \"loss flat\" (or give --from-lint FILE "
                         "or --from-watch REPORT)")
    index = load_index(args.kb, dense=not args.lexical)
    fail_if_invalid(index.header["problems"])
    result = answer(index, query, limit=args.limit, area=args.area, tag=args.tag, dense=not args.lexical,
                    lint_source=_lint_report_code)
    why = None if args.lexical else dense_unavailable(index)
    if why:
        print(f"kb: lexical ranking only: {why}", file=sys.stderr)
    if args.json:
        print_json(result.to_json())
        return EXIT_OK
    print_answer(result)
    return EXIT_OK


def _lint_report_code(code: str, path: str) -> list:
    """kb lint on a pasted report's code, imported only when a report holds code (a plain search never does)."""
    from kb_tools.lint import lint_text
    return lint_text(code, path)


def print_answer(result) -> None:
    """The ranked hits as lines a person reads: a report's parts first, the scope note, then each hit
    with the line that matched, what the report showed for it, and its tell-apart check."""
    hits = result.hits
    if result.report is not None:
        print(style(report_summary(result.report), "2"))
    if not hits:
        print("no entry shares a word with that query; try the words you see in the log, e.g. \"loss flat\"")
        return
    if result.scope:
        print(f"out of scope: {result.scope}. The entries below are guesses.")
    elif result.tell_apart:
        print(f"the first {len(result.tell_apart)} are close: the words cannot tell them apart; one check can, "
              f"shown under each")
    width = max(len(h.id) for h in hits)
    for n, hit in enumerate(hits, 1):
        flag = "  (low confidence)" if hit.low_confidence else ""
        print(f"{n:2d}. {style(hit.id.ljust(width), '1')}  {hit.title}  [{hit.area}]  {hit.score:.0f}{flag}")
        print(f"    {style('matched:', '2')} {hit.matched}")
        for _, line in result.evidence.get(hit.id, ()):
            print(f"    {style('found:', '2')} {line}")
        if hit.id in result.tell_apart:
            print(f"    {style('tell apart:', '2')} {result.tell_apart[hit.id]}")


def report_summary(report) -> str:
    """One line on how a pasted report was read."""
    return (f"read as a report: {plural(len(report.prose), 'line')} of text, {plural(len(report.code), 'code block')} "
            f"(kb lint), {plural(len(report.errors), 'error line')}, {plural(len(report.logs), 'log line')}")


def search_from_lint(args, query: str) -> int:
    """The entries behind what `kb lint` finds in a script, in the order of their first finding;
    a file that could not be linted is a line on stderr and exit 1, after the others' entries."""
    from kb_tools.lint.engine import UNLINTABLE, lint_paths
    kb = load_kb_checked(args)
    if query.strip():
        raise UsageError("search: give a query or --from-lint FILE, not both")
    hits, unlinted = {}, []
    for finding in lint_paths([args.from_lint], stdin=True):
        if finding.code == UNLINTABLE:
            unlinted.append(finding)
            print(f"kb: {finding}", file=sys.stderr)
            continue
        entry = kb.entries.get(finding.entry)
        if entry is None or (args.area and entry.area != args.area) or (args.tag and args.tag.lower() not in entry.tags):
            continue
        hit = hits.setdefault(entry.id, {"id": entry.id, "title": entry.title, "area": entry.area, "score": 0,
                                         "matched": str(finding), "low_confidence": False})
        hit["score"] += 1
    shown = list(hits.values())[:args.limit]
    if args.json:
        print_json(shown)
        return EXIT_FAIL if unlinted else EXIT_OK
    if not shown and not unlinted:
        print(f"kb lint finds none of the KB's mistakes in {'standard input' if args.from_lint == '-' else args.from_lint}")
    for n, hit in enumerate(shown, 1):
        print(f"{n:2d}. {style(hit['id'], '1')}  {hit['title']}  [{hit['area']}]  "
              f"{hit['score']} finding{'s' if hit['score'] != 1 else ''}")
        print(f"    {style('found:', '2')} {hit['matched']}")
    return EXIT_FAIL if unlinted else EXIT_OK


def search_from_watch(args, query: str) -> int:
    """The entries behind what `kb watch` found in a run, most confident finding first, each with
    the measurement that named it. Reads the report's JSON only: no torch."""
    from kb_tools.watch.report import finding_line, read_report
    if query.strip():
        raise UsageError("search: give a query or --from-watch REPORT, not both")
    report = read_report(args.from_watch)
    kb = load_kb_checked(args)
    hits, unknown = {}, []
    for finding in report["findings"]:
        entry = kb.entries.get(finding["entry"])
        if entry is None:
            unknown.append(finding["entry"])
            continue
        if (args.area and entry.area != args.area) or (args.tag and args.tag.lower() not in entry.tags):
            continue
        hit = hits.setdefault(entry.id, {"id": entry.id, "title": entry.title, "area": entry.area, "score": 0,
                                         "matched": finding_line(finding), "low_confidence": False,
                                         "confidence": finding.get("confidence")})
        hit["score"] += 1
    for name in sorted(set(unknown)):
        print(f"kb: the report names entry '{name}', which this KB does not have (a newer or older kb wrote it)",
              file=sys.stderr)
    shown = list(hits.values())[:args.limit]
    if args.json:
        print_json(shown)
        return EXIT_OK
    if not shown:
        print(f"kb watch found nothing in that run ({'standard input' if args.from_watch == '-' else args.from_watch})")
    for n, hit in enumerate(shown, 1):
        print(f"{n:2d}. {style(hit['id'], '1')}  {hit['title']}  [{hit['area']}]  "
              f"{hit['score']} finding{'s' if hit['score'] != 1 else ''}")
        print(f"    {style('found:', '2')} {hit['matched']}")
    return EXIT_OK


def add_arguments(p):
    from kb_tools.core.model import AREAS
    p.add_argument("query", nargs="*", help="what the run shows; - reads it from standard input")
    for flags, name, kind, default, help_text in SEARCH_OPTIONS:  # the quick parser reads them too
        if kind == "flag":
            p.add_argument(*flags, dest=name, action="store_true", help=help_text)
        elif kind == "area":
            p.add_argument(*flags, dest=name, choices=AREAS, default=default, help=help_text)
        else:
            p.add_argument(*flags, dest=name, type=kind, default=default, help=help_text)
