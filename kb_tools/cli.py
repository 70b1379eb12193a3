"""`kb`: a thin command line over the kb_tools library.

Exit codes: 0 success, 1 not found / invalid KB / a check failed, 2 usage error.
A user's mistake prints one line on stderr, never a traceback.
"""
from __future__ import annotations

import os
import sys

from kb_tools.fastpath import (EXIT_FAIL, EXIT_OK, SEARCH_OPTIONS, cmd_search, fail_if_invalid, guarded,
                       print_json, query_text, run_quick_search, style)
from kb_tools.core.model import AREAS
from kb_tools.core.util import KBError, UsageError, did_you_mean


# ---------------------------------------------------------------- helpers (the output ones live in fastpath.py)

def _load(args, require_clean: bool = True):
    from kb_tools.core.load import load_kb
    kb = load_kb(args.kb)
    if require_clean:
        fail_if_invalid(kb.problems)
    return kb


def _refuse_bundled(root: str) -> None:
    """Commands that write into the KB never write into the copy installed with the package."""
    from kb_tools.core.locate import bundled_kb
    if bundled_kb(root):
        raise KBError(f"{root}: the copy of the KB installed with the package is never written; "
                      f"run kb from a checkout or pass --kb DIR")


def _entry_or_fail(kb, name: str):
    entry = kb.resolve(name)
    if entry is None:
        raise KBError(f"unknown entry '{name}'{did_you_mean(name, list(kb.entries) + list(kb.aliases))}")
    return entry


# ---------------------------------------------------------------- commands

def cmd_check(args) -> int:
    """Validate every entry, quote and source; print each problem on one line."""
    kb = _load(args, require_clean=False)
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


def search_from_lint(args, query: str) -> int:
    """The entries behind what `kb lint` finds in a script, in the order of their first finding;
    a file that could not be linted is a line on stderr and exit 1, after the others' entries."""
    from kb_tools.lint.engine import UNLINTABLE, lint_paths
    kb = _load(args)
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


def cmd_lint(args) -> int:
    """Find the KB's mistakes in training scripts; exit 1 when something is found."""
    from kb_tools.lint.engine import RULES, lint_paths, python_files
    split = lambda v: [c.strip() for c in v.split(",") if c.strip()] if v else None  # noqa: E731
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


def cmd_show(args) -> int:
    """One entry in full."""
    from kb_tools.lint.engine import rules_for
    kb = _load(args)
    e = _entry_or_fail(kb, args.id)
    if args.json:
        from kb_tools.render.agents import entry_json
        print_json(entry_json(e))
        return EXIT_OK
    print(style(f"{e.id}: {e.title}", "1"))
    print(f"area: {e.area}   tags: {', '.join(e.tags)}" + (f"   aliases: {', '.join(e.aliases)}" if e.aliases else ""))
    print(f"file: {e.path}")
    sections = [("Symptoms", "\n".join(f"- {s}" for s in e.symptoms)), ("Why it happens", e.cause),
                ("Fix", e.fix), ("How to check", e.check), ("Correction", e.correction),
                ("Caveats", e.caveats), ("Evidence", "\n".join(f"- {c['quote']}: {c['supports']}" for c in e.evidence)),
                ("See also", ", ".join(e.see_also)),
                ("Lint rules", "\n".join(f"{code} {name} (kb lint finds it in a script)"
                                          for code, name in rules_for(e.id))),
                ("Snippet", f"run it: kb run {e.id}" + (
                    f"   (two processes under torchrun, as `kb snippet {e.id} > s.py && torchrun "
                    f"--standalone --nproc-per-node 2 s.py`)" if e.launch == "torchrun"
                    else f"   (or: kb snippet {e.id} | python)"))]
    for heading, body in sections:
        if body:
            print(f"\n{style(heading, '1;4')}\n{body.strip()}")
    return EXIT_OK


def cmd_snippet(args) -> int:
    """Only the entry's runnable code, so `kb snippet ID | python` runs it."""
    kb = _load(args)
    sys.stdout.write(_entry_or_fail(kb, args.id).snippet)
    return EXIT_OK


def cmd_run(args) -> int:
    """Run an entry's snippet the way its test does (torchrun for distributed ones); its exit status,
    then each figure it printed beside the entry's claim (a claim that fails here is exit 1)."""
    import importlib.util
    import subprocess
    import tempfile

    from kb_tools.snippets import runner as snippets
    kb = _load(args)
    entry = _entry_or_fail(kb, args.id)
    if importlib.util.find_spec("torch") is None:
        raise KBError(f"torch is not installed in {sys.executable}; the snippets are tested against "
                      f"torch==2.13.0: `{sys.executable} -m pip install torch==2.13.0`")
    env = snippets.child_env(args.device) if args.device else {**os.environ, "PYTHONUNBUFFERED": "1"}
    sys.stdout.flush()
    printed = []
    with tempfile.TemporaryDirectory(prefix="kb-run-") as tmp:
        script = os.path.join(tmp, f"{entry.id.replace('-', '_')}.py")
        with open(script, "w", encoding="utf-8") as fh:
            fh.write(snippets.script_text(entry))
        try:  # the output is passed through as it comes, and kept for the figures
            proc = subprocess.Popen(snippets.command(entry, script), cwd=tmp, env=env,
                                    stdout=subprocess.PIPE, text=True, errors="replace", bufsize=1)
        except OSError as exc:
            raise KBError(f"cannot start the snippet: {exc.strerror or exc}") from None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            printed.append(line)
        proc.wait()
    if proc.returncode != 0:
        raise KBError(f"the snippet of {entry.id} exited with status {proc.returncode} ({entry.path})")
    return _report_figures(entry, "".join(printed))


def _report_figures(entry, stdout: str) -> int:
    """Each figure the snippet printed here beside the claim the entry states, on stderr."""
    from kb_tools.snippets import runner as snippets
    if not entry.figures:
        return EXIT_OK
    measured = snippets.printed_figures(stdout)
    width = max(map(len, entry.figures))
    failing = []
    print(f"figures measured here, against what {entry.id} claims:", file=sys.stderr)
    for name, claim in entry.figures.items():
        value = measured.get(name)
        holds = value is not None and snippets.claim_holds(claim, value)
        if not holds:
            failing.append(name)
        verdict = style("holds", "32") if holds else style("does not hold", "1;31")
        print(f"  {name:<{width}}  {value if value is not None else '(not printed)'}  "
              f"(claim: {claim})  {verdict}", file=sys.stderr)
    if failing:
        raise KBError(f"{entry.id}: {', '.join(failing)} measured outside the entry's claim on this machine; "
                      f"please report it with the output above ({entry.path})")
    return EXIT_OK


def cmd_eval(args) -> int:
    """Score the search ranking on labelled queries: hit@1, hit@3, MRR, and each miss."""
    from kb_tools.search.rank import build_index, evaluate, load_queries
    kb = _load(args)
    path = args.queries or os.path.join(os.path.dirname(kb.root), "tests", "queries.yaml")
    if not args.queries and not os.path.isfile(path):
        raise KBError(f"no labelled queries at {path} (they ship with a checkout, not with the package): "
                      f"pass a file, `kb eval QUERIES.yaml`")
    queries = load_queries(path)
    report = evaluate(build_index(kb), queries)
    if args.json:
        print_json(report)
    else:
        print(f"{report['queries']} queries: hit@1 {report['hit@1']:.3f}  hit@3 {report['hit@3']:.3f}  "
              f"MRR {report['mrr']:.3f}")
        for miss in report["misses"]:
            where = f"rank {miss['rank']}" if miss["rank"] else "not in top 10"
            print(f"- [{miss['kind']}] {miss['query'][:90]!r}: {miss['expect'][0]} at {where}; "
                  f"above it: {', '.join(miss['above']) or '-'}")
    if report["unknown_ids"]:
        print(f"warning: labels name entries this KB lacks: {', '.join(report['unknown_ids'])}", file=sys.stderr)
    return EXIT_OK


def cmd_list(args) -> int:
    """Every entry, one line each, by area."""
    kb = _load(args)
    entries = [e for e in kb.entries.values() if args.area is None or e.area == args.area]
    if args.json:
        print_json([{"id": e.id, "title": e.title, "area": e.area} for e in entries])
        return EXIT_OK
    width = max((len(e.id) for e in entries), default=0)
    for e in sorted(entries, key=lambda e: (AREAS.index(e.area) if e.area in AREAS else 99, e.id)):
        print(f"{e.area:<12} {e.id.ljust(width)}  {e.title}")
    return EXIT_OK


def cmd_build(args) -> int:
    """Render the KB into pages and build the docs site with mkdocs in strict mode."""
    from kb_tools.site.build import build_site
    kb = _load(args)
    report = build_site(kb, out_dir=args.out, work_dir=args.work, results_path=args.results,
                        site_url=args.site_url, repo_url=args.repo_url, edit_uri=args.edit_uri)
    if args.json:
        print_json(report.to_dict())
    else:
        print(f"built {report.pages} pages ({report.entries} entries, {report.sources} sources, "
              f"{report.quotes} quotes, {report.redirects} alias redirects) into {report.out} "
              f"in {report.seconds:.1f}s")
    return EXIT_OK


def cmd_serve(args) -> int:
    """Preview the docs site with live reload; pages follow edits to the KB."""
    from kb_tools.site.build import serve_site
    _load(args)  # fail early, in one line, on an invalid KB
    serve_site(args.kb, work_dir=args.work, results_path=args.results, dev_addr=args.dev_addr,
               log=lambda msg: print(msg, file=sys.stderr))
    return EXIT_OK


def cmd_verify(args) -> int:
    """Check every quote against its cached source or installed package; exit 1 on any defect."""
    from kb_tools.verify.quotes import fix_lines, verify_kb
    kb = _load(args, require_clean=False)
    # a quote file or source that does not parse would silently drop its quotes: fail on it here
    broken = [p for p in kb.problems if "/entries/" not in "/" + p.path.replace(os.sep, "/")]
    report = verify_kb(kb)
    fixed = []
    if args.fix_lines and any(d.kind == "wrong-lines" for d in report.defects):
        _refuse_bundled(kb.root)
        refused = []
        fixed = fix_lines(kb, report, refused)
        for rel, reason in refused:
            print(f"kb: did not fix lines in {rel}: {reason}", file=sys.stderr)
        kb = _load(args, require_clean=False)
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


def cmd_context(args) -> int:
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


def cmd_export_skill(args) -> int:
    """Write SKILL.md for agent hosts that load skills, generated from the KB."""
    from kb_tools.render.agents import export_skill
    kb = _load(args)
    print(f"wrote {export_skill(kb, args.dir)}")
    return EXIT_OK


def cmd_mcp(args) -> int:
    """Serve the KB to MCP clients over stdio until the client disconnects."""
    _load(args)  # fail early, in one line, on an invalid KB
    try:
        from kb_tools.mcp_server import serve
    except ImportError as exc:
        raise KBError(f"the MCP server needs the `mcp` package ({exc.name} is missing): "
                      f"{MCP_INSTALL}") from None
    serve(args.kb)
    return EXIT_OK


def cmd_evidence_add(args) -> int:
    """Cache a web page or local file as a source under evidence/, with provenance."""
    from kb_tools.verify.evidence import add_evidence
    from kb_tools.core.locate import evidence_dir, find_kb_root
    root = find_kb_root(args.kb)
    _refuse_bundled(root)
    result = add_evidence(args.target, args.id, evidence_dir(root), title=args.title, author=args.author,
                          published=args.published, url=args.url, coverage=args.coverage,
                          force=args.force, timeout=args.timeout, max_bytes=args.max_bytes,
                          kind=args.kind, retells={"title": args.retells_title, "author": args.retells_author,
                                                   "url": args.retells_url})
    if args.json:
        print_json(result)
    else:
        print(f"wrote {result['path']} ({result['lines']} lines, {result['content_type']}, sha256 {result['sha256'][:12]})")
    return EXIT_OK


def cmd_evidence_rehash(args) -> int:
    """Record the current body sha256 of cached sources after a deliberate edit."""
    from kb_tools.verify.evidence import rehash_sources
    kb = _load(args, require_clean=False)
    if not args.ids and not args.all:
        raise UsageError("name the sources to rehash (IDs), or pass --all")
    changed = rehash_sources(kb, args.ids or None)
    for path, old, new, added in changed:
        print(f"{path}: sha256 {new[:12]} (was {old[:12] if old else 'not recorded'})"
              + ("; a line was added to the front matter: run `kb verify --fix-lines`" if added else ""))
    if not changed:
        print("every recorded sha256 already matches its body")
    return EXIT_OK


# ---------------------------------------------------------------- parser

def _parser_class():
    """argparse's parser, made to fail in one line; argparse is imported only when a command needs it."""
    import argparse

    class Formatter(argparse.HelpFormatter):
        """Told the terminal width, so that it skips argparse's own `import shutil` per argument."""

        def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
            if width is None:
                try:
                    width = int(os.environ.get("COLUMNS") or os.get_terminal_size(sys.__stdout__.fileno()).columns)
                except (ValueError, OSError, AttributeError):
                    width = 80
                width = max(width - 2, 20)
            super().__init__(prog, indent_increment, max_help_position, width)

    class Parser(argparse.ArgumentParser):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("formatter_class", Formatter)
            super().__init__(*args, **kwargs)

        def error(self, message):  # one line, exit 2, no usage dump
            raise UsageError(f"{self.prog}: {message}")

    return Parser


def _add_kb_option(p, top_level: bool = False) -> None:
    """--kb on the top-level parser, and on each command (where it only counts when given)."""
    import argparse
    p.add_argument("--kb", metavar="DIR", default=None if top_level else argparse.SUPPRESS,
                   help="KB directory (default: $KB_PATH, else this checkout's or the bundled KB)")


def add_json_option(p, what: str) -> None:
    """`--json` on every command that has it, with one meaning: `what`, as JSON on stdout, nothing else."""
    p.add_argument("--json", action="store_true", help=f"{what}, as JSON on stdout")


def _args_check(p):
    add_json_option(p, "the counts and every problem")


def _args_search(p):
    p.add_argument("query", nargs="*", help="what the run shows; - reads it from standard input")
    for flags, name, kind, default, help_text in SEARCH_OPTIONS:  # declared once, in fastpath.py
        if kind == "flag":
            p.add_argument(*flags, dest=name, action="store_true", help=help_text)
        elif kind == "area":
            p.add_argument(*flags, dest=name, choices=AREAS, default=default, help=help_text)
        else:
            p.add_argument(*flags, dest=name, type=kind, default=default, help=help_text)


def _args_lint(p):
    p.add_argument("paths", nargs="*", metavar="PATH", help="Python files, or folders to search for them; - reads one script from standard input")
    p.add_argument("--select", metavar="CODES", help="only these rules (comma-separated codes or prefixes)")
    p.add_argument("--ignore", metavar="CODES", help="skip these rules (comma-separated codes or prefixes)")
    p.add_argument("--list-rules", action="store_true", help="every rule: code, name, the entry it detects")
    add_json_option(p, "the findings (path, line, col, code, name, message, entry)")


def _args_show(p):
    p.add_argument("id", help="entry id or alias (e.g. double-softmax or O12)")
    add_json_option(p, "the entry")


def _args_snippet(p):
    p.add_argument("id", help="entry id or alias")


def _args_run(p):
    p.add_argument("id", help="entry id or alias")
    p.add_argument("--device", choices=("cpu", "cuda"), help="run as the test does: cpu hides every GPU; "
                   "default: the snippet picks cuda when available")


def _args_eval(p):
    p.add_argument("queries", nargs="?", help="queries file (default: tests/queries.yaml of this checkout)")
    add_json_option(p, "metrics and misses")


def _args_list(p):
    p.add_argument("--area", choices=AREAS, help="only this area")
    add_json_option(p, "id, title and area of each entry")


def _args_build(p):
    p.add_argument("--out", metavar="DIR", help="where the HTML site goes (default: site/ of this checkout)")
    p.add_argument("--work", metavar="DIR", help="where generated pages go (default: build/site/)")
    p.add_argument("--results", metavar="FILE", help="verified snippet runs (default: kb/verified/results.json)")
    p.add_argument("--site-url", metavar="URL", help="address the site is served from, sub-path allowed: "
                   "absolute sitemap and canonical links, a 404 page that works anywhere (default: $KB_SITE_URL)")
    p.add_argument("--repo-url", metavar="URL", help="repository of the KB: each entry page links to its YAML "
                   "file there (default: $KB_REPO_URL; no link without it)")
    p.add_argument("--edit-uri", metavar="PATH", help="path from --repo-url to a file's edit view "
                   "(default: $KB_EDIT_URI or edit/main/)")
    add_json_option(p, "the build report")


def _args_serve(p):
    p.add_argument("--dev-addr", default="127.0.0.1:8000", metavar="HOST:PORT", help="address to serve on")
    p.add_argument("--work", metavar="DIR", help="where generated pages go (default: build/site/)")
    p.add_argument("--results", metavar="FILE", help="verified snippet runs (default: kb/verified/results.json)")


def _args_verify(p):
    add_json_option(p, "the report")
    p.add_argument("--strict", action="store_true", help="also fail on quotes that cannot be checked here "
                                                         "(their package is not installed)")
    p.add_argument("--fix-lines", action="store_true", help="rewrite wrong `lines:` values in place, "
                                                            "changing nothing else, then report")


def _args_context(p):
    p.add_argument("query", nargs="+", help="what the run shows; - reads it from standard input")
    p.add_argument("--budget", type=int, default=1500, metavar="TOKENS",
                   help="at most this many tokens (estimated at 4 characters each; default 1500)")
    p.add_argument("--limit", "-n", type=int, default=5, help="at most this many entries (default 5)")
    p.add_argument("--area", choices=AREAS, help="only entries of this area")
    add_json_option(p, "the Markdown with the entries it holds and its token estimate")


def _args_export_skill(p):
    p.add_argument("dir", metavar="DIR", help="folder to write SKILL.md into (created if missing)")


def _args_mcp(p):
    pass


def _args_watch(p):
    from kb_tools.watch.command import add_arguments  # lazily: kb_tools.watch is the only user of torch
    add_arguments(p)


def cmd_watch(args) -> int:
    """Run a training script under instrumentation; exit 1 when something is found."""
    from kb_tools.watch.command import run_command
    return run_command(args)


def _args_evidence(p):
    ev = p.add_subparsers(dest="evidence_command", metavar="ACTION", parser_class=type(p))
    ev.required = True
    p = ev.add_parser("add", help="cache a URL or file as evidence/<ID>.md with provenance", description=(
        "Fetch an http(s) URL (or read a local file), turn HTML into readable text, and write "
        "evidence/ID.md with front matter: title, author, kind, url, published, retrieved, coverage, "
        "sha256 (of the body written below the front matter)."))
    p.add_argument("target", metavar="URL|FILE", help="http(s) URL or path of a local file")
    p.add_argument("--id", required=True, help="source id (kebab-case); the file is evidence/ID.md")
    p.add_argument("--title", help="title (default: the page's <title>, else the id)")
    p.add_argument("--author", help="author (default: the page's author meta tag, else 'unknown')")
    p.add_argument("--published", help="publication date, YYYY-MM-DD (default: 'unknown')")
    p.add_argument("--url", help="canonical URL to record (default: the URL fetched, or the page's canonical link)")
    p.add_argument("--coverage", choices=("full", "excerpt"), default="full", help="default: full")
    p.add_argument("--kind", choices=("primary", "secondary"), default="primary",
                   help="primary: the author's own published words (default); secondary: a retelling of "
                        "another work, named with the three --retells-* options")
    p.add_argument("--retells-title", help="secondary: title of the work retold")
    p.add_argument("--retells-author", help="secondary: author of the work retold")
    p.add_argument("--retells-url", help="secondary: URL of the work retold")
    p.add_argument("--force", action="store_true", help="overwrite an existing source")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds for the whole download (default 20)")
    p.add_argument("--max-bytes", type=int, default=5_000_000, help="size cap of the download (default 5 MB)")
    _add_kb_option(p)
    add_json_option(p, "what was written")
    p.set_defaults(func=cmd_evidence_add)
    p = ev.add_parser("rehash", help="record the body sha256 of sources after a deliberate edit", description=(
        "Write each named source's current body sha256 into its front matter (`kb verify` reports "
        "cache-changed when they differ). Only the sha256 line changes."))
    p.add_argument("ids", nargs="*", metavar="ID", help="source ids (the file stems under evidence/)")
    p.add_argument("--all", action="store_true", help="every source")
    _add_kb_option(p)
    p.set_defaults(func=cmd_evidence_rehash)


# `kb mcp`'s one dependency, installed into the interpreter that runs kb (kb-tools is not on PyPI,
# so `pip install 'kb-tools[mcp]'` finds nothing; the extra works only from a checkout, as '.[mcp]')
MCP_INSTALL = (f'"{sys.executable}"' if " " in sys.executable else sys.executable) + " -m pip install 'mcp>=2.3,<3'"

# name: (one-line help, longer description or None, arguments, handler)
COMMANDS = {
    "check": ("validate the KB; exit 1 on any problem", None, _args_check, cmd_check),
    "search": ("rank entries for a symptom", "Rank entries for what you see: two words (\"loss flat\"), "
               "an error message, or a paragraph.", _args_search, cmd_search),
    "show": ("one entry in full", None, _args_show, cmd_show),
    "lint": ("find the KB's mistakes in training scripts; exit 1 when found", (
        "Read Python training scripts and report the mistakes of the KB's entries that are visible in the "
        "code, as path:line:col: CODE message (kb show ENTRY). Exit 0 clean, 1 findings, 2 usage or an "
        "unreadable or unparsable file. Silence a line with `# kb: noqa` or `# kb: noqa[KBL001]`."),
        _args_lint, cmd_lint),
    "snippet": ("only the entry's runnable code (pipe it to python)", None, _args_snippet, cmd_snippet),
    "run": ("run an entry's snippet as its test does (torchrun for distributed ones)", None, _args_run, cmd_run),
    "list": ("every entry, one line each", None, _args_list, cmd_list),
    "eval": ("score the search ranking on labelled queries", "hit@1, hit@3 and MRR of `kb search` on a YAML "
             "file of labelled queries, then each miss with what ranked above the right answer.",
             _args_eval, cmd_eval),
    "verify": ("check every quote against its source; exit 1 on any defect", (
        "Check that every quote is verbatim in its cached source, on exactly the cited lines, or in the "
        "docstring of the installed package's object. Formatting (line breaks, spaces, emphasis, curly "
        "quotes, ... vs the ellipsis character) does not count; [...] marks an elision."),
        _args_verify, cmd_verify),
    "build": ("build the docs site (strict mkdocs) from the KB", None, _args_build, cmd_build),
    "serve": ("preview the docs site with live reload", None, _args_serve, cmd_serve),
    "context": ("the best entries for a query as Markdown for a model's context window", (
        "The entries `kb search` ranks first for the query, as compact Markdown (title, the symptom that "
        "matched, cause, fix, check, and the snippet when there is room), trimmed to a token budget with "
        "the most relevant first."), _args_context, cmd_context),
    "export-skill": ("write SKILL.md for agent hosts that load skills", (
        "Write DIR/SKILL.md: when to use the KB, how to call kb search and kb context, the first-hour "
        "checklist and every entry, generated from the KB so it cannot drift."), _args_export_skill,
        cmd_export_skill),
    "mcp": ("serve the KB to MCP clients (editors, agents) over stdio", (
        "A Model Context Protocol server on stdin/stdout with the tools search, show, snippet, "
        "verify_quote, context and lint (search, show, context and lint return what their --json prints), and every "
        "entry as the resource kb://entries/ID. Needs the mcp package in the Python that runs kb: "
        "python -m pip install 'mcp>=2.3,<3' (without it, kb mcp prints the command for its interpreter)."),
        _args_mcp, cmd_mcp),
    "evidence": ("manage cached sources under evidence/", None, _args_evidence, None),
    "watch": ("run a training script under instrumentation and name what it shows; exit 1 when found", (
        "Run a training script (kb watch -- python train.py ARGS, or torchrun ... train.py) with no change "
        "to its code, and report what the run shows (a parameter with a gradient that never moves, "
        "probabilities fed to cross_entropy, a gradient nothing clears, ...) with the KB entry that explains "
        "it and the numbers measured. Exit 0 nothing found, 1 findings or the script failed, 2 usage."),
        _args_watch, cmd_watch),
}


def command_named(argv) -> str | None:
    """The subcommand that `argv` names, found without building any parser."""
    after_kb = False
    for token in argv:
        if after_kb:
            after_kb = False
        elif token == "--kb":
            after_kb = True
        elif not token.startswith("-"):
            return token if token in COMMANDS else None
    return None


def build_parser(only: str | None = None):
    """The `kb` parser; with `only`, just that subcommand is built.

    argparse spends longer constructing ten subcommands than a cached search
    takes, so a run builds the one it was asked for (all of them for --help or
    a mistyped command, so the error can list the choices).
    """
    Parser = _parser_class()
    parser = Parser(prog="kb", description="Search and check a knowledge base for debugging PyTorch training.",
                    epilog="Exit codes: 0 ok, 1 not found / invalid / check failed, 2 usage error.")
    _add_kb_option(parser, top_level=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name, (summary, description, add_arguments, handler) in COMMANDS.items():
        if only not in (None, name):
            continue
        p = sub.add_parser(name, help=summary, description=description or summary)
        add_arguments(p)
        if handler is not None:
            _add_kb_option(p)
            p.set_defaults(func=handler)
    return parser


def main(argv=None) -> int:
    """`kb` with `argv` (default sys.argv[1:]): a plain search through the quick parser, anything else through argparse."""
    argv = sys.argv[1:] if argv is None else argv

    def run() -> int:
        code = run_quick_search(argv)
        if code is not None:
            return code
        args = build_parser(command_named(argv)).parse_args(argv)
        return args.func(args)
    return guarded(run)


if __name__ == "__main__":
    sys.exit(main())
