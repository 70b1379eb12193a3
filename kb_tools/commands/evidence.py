"""`kb evidence add` and `kb evidence rehash`: cached sources under evidence/, with provenance."""
from __future__ import annotations

from kb_tools.commands.common import add_json_option, add_kb_option, load_kb_checked, refuse_bundled
from kb_tools.commands.output import EXIT_OK, print_json
from kb_tools.core.util import UsageError

NAME = "evidence"
SUMMARY = "manage cached sources under evidence/"
DESCRIPTION = None


def run_add(args) -> int:
    """Cache a web page or local file as a source under evidence/, with provenance."""
    from kb_tools.verify.evidence import add_evidence
    from kb_tools.core.locate import evidence_dir, find_kb_root
    root = find_kb_root(args.kb)
    refuse_bundled(root)
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


def run_rehash(args) -> int:
    """Record the current body sha256 of cached sources after a deliberate edit."""
    from kb_tools.verify.evidence import rehash_sources
    kb = load_kb_checked(args, require_clean=False)
    if not args.ids and not args.all:
        raise UsageError("name the sources to rehash (IDs), or pass --all")
    changed = rehash_sources(kb, args.ids or None)
    for path, old, new, added in changed:
        print(f"{path}: sha256 {new[:12]} (was {old[:12] if old else 'not recorded'})"
              + ("; a line was added to the front matter: run `kb verify --fix-lines`" if added else ""))
    if not changed:
        print("every recorded sha256 already matches its body")
    return EXIT_OK


def add_arguments(p):
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
    add_kb_option(p)
    add_json_option(p, "what was written")
    p.set_defaults(func=run_add)
    p = ev.add_parser("rehash", help="record the body sha256 of sources after a deliberate edit", description=(
        "Write each named source's current body sha256 into its front matter (`kb verify` reports "
        "cache-changed when they differ). Only the sha256 line changes."))
    p.add_argument("ids", nargs="*", metavar="ID", help="source ids (the file stems under evidence/)")
    p.add_argument("--all", action="store_true", help="every source")
    add_kb_option(p)
    p.set_defaults(func=run_rehash)
