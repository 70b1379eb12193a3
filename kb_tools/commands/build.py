"""`kb build`: the docs site rendered from the KB and built with mkdocs in strict mode (kb_tools/site)."""
from __future__ import annotations

from kb_tools.commands.common import add_json_option, load_kb_checked
from kb_tools.commands.output import EXIT_OK, print_json

NAME = "build"
SUMMARY = "build the docs site (strict mkdocs) from the KB"
DESCRIPTION = None


def run(args) -> int:
    """Render the KB into pages and build the docs site with mkdocs in strict mode."""
    from kb_tools.site.build import build_site
    kb = load_kb_checked(args)
    report = build_site(kb, out_dir=args.out, work_dir=args.work, results_path=args.results,
                        site_url=args.site_url, repo_url=args.repo_url, edit_uri=args.edit_uri)
    if args.json:
        print_json(report.to_dict())
    else:
        print(f"built {report.pages} pages ({report.entries} entries, {report.sources} sources, "
              f"{report.quotes} quotes, {report.redirects} alias redirects) into {report.out} "
              f"in {report.seconds:.1f}s")
        for note in report.notes:
            print(note)
    return EXIT_OK


def add_arguments(p):
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
