"""The docs site: the loaded KB rendered through jinja2 templates into markdown
pages, then built by mkdocs (material theme) in strict mode.

Layout of a build:

    <work>/mkdocs.yml   generated; INHERITs the project's mkdocs.yml, adds docs_dir and nav
    <work>/docs/        generated pages (build output, never committed)
    <out>/              the built HTML site

Stable URLs: entries at /entries/<id>/, sources at /sources/<id>/ (with an
anchor #L<n> per line of the cached file), area indexes at /areas/<area>/, and
one redirect page per alias at /<alias>/.

Safety: every value a template prints goes through the environment's
`finalize` hook, which turns markdown and HTML control characters into numeric
character references, so text from the YAML can never become markup or script.
Only filters that build markup on purpose (and escape what they embed) return
`Markup` and bypass it. Entry mentions in prose become links the same way: the
link text is escaped like any text, and the address is an entry id, which the
loader keeps URL-safe (KB017).

jinja2 and mkdocs are imported inside the functions: `kb search` never pays for them.
"""
from __future__ import annotations

import html
import json
import os
import re
import time
from dataclasses import asdict, dataclass, field

from kb_tools import PACKAGE_DIR
from kb_tools.core.model import AREA_INFO, AREAS, TRIAGE_PATH
from kb_tools.core.util import KBError, first_sentence, invalid_kb, prose_words, write_atomic

WORK_MARKER = ".kb-site-work"
SITE_MARKER = ".kb-site"
BUILD_LOCK = ".kb-build.lock"  # in the work folder, held by the build that is using it


# The first-hour path on the home page, in the order worth trying them.
STATIC = ("kb.css",)  # copied from site_templates/ into docs/stylesheets/
SCRIPTS = ("kb-site.js",)  # copied from site_templates/ into docs/javascripts/
NAMES_FILE = "javascripts/kb-names.json"  # ids, aliases and titles, for the 404 page's did-you-mean
THEME_DIR = "theme"  # under the work folder: the theme override (404 page), from site_templates/theme/
DEFAULT_EDIT_URI = "edit/main/"  # GitHub's edit view of the default branch, as mkdocs assumes

_SAFE_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Every ASCII character that means something to markdown, its extensions or HTML.
_ENTITIES = {ord(c): f"&#{ord(c)};" for c in "&<>\"'\\`*_{}[]()#+-.!|~^=:$%@"}
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


class SiteError(KBError):
    """The site cannot be generated or built; the message says why, in one line."""


def project_root() -> str:
    """The folder with mkdocs.yml and site_templates/: this package's checkout, a copy
    bundled in the package, or the current directory or one above it (for a
    non-editable install run from a checkout, as `make run` does)."""
    candidates = []
    here = os.path.abspath(os.getcwd())
    while True:  # the checkout being worked in first: never build into an installed package
        candidates.append(here)
        if os.path.dirname(here) == here:
            break
        here = os.path.dirname(here)
    candidates += [os.path.dirname(PACKAGE_DIR), os.path.join(PACKAGE_DIR, "_data")]
    for c in candidates:
        if os.path.isfile(os.path.join(c, "mkdocs.yml")) and os.path.isdir(os.path.join(c, "site_templates")):
            return c
    raise SiteError("no mkdocs.yml with site_templates/ found: run kb build from a checkout of the project")


# ---------------------------------------------------------------- escaping

def _markup(text: str):
    from markupsafe import Markup
    return Markup(text)


def _entities(text: str) -> str:
    return text.translate(_ENTITIES)


def inline(value, links=None) -> str:
    """Plain text with `code` spans, as inert inline markdown: whitespace collapsed,
    code spans become <code>, every other control character an entity.
    `links` (name -> page, from entry_links) turns entry mentions into links."""
    text = " ".join(str(value).split())
    out, pos = [], 0
    for m in _CODE_SPAN.finditer(text):
        out.append(_linked(text[pos:m.start()], links))
        inner = m.group(2).strip()
        code = f"<code>{_entities(inner)}</code>"
        out.append(_mention_link(code, *links[inner]) if links and inner in links else code)
        pos = m.end()
    out.append(_linked(text[pos:], links))
    return _markup("".join(out))


def prose(value, links=None) -> str:
    """A prose field as markdown paragraphs; a paragraph whose lines start with
    `-`, `*` or `1.` becomes a list, so writers' lists survive."""
    if not value:
        return _markup("")
    blocks = []
    for para in re.split(r"\n\s*\n", str(value).strip()):
        lines = para.splitlines()
        m = _LIST_ITEM.match(lines[0])
        if m:
            ordered = m.group(0).strip()[0].isdigit()
            items = []
            for line in lines:
                item = _LIST_ITEM.match(line)
                if item:
                    items.append(line[item.end():])
                else:
                    items[-1] += " " + line
            marker = "1." if ordered else "-"
            blocks.append("\n".join(f"{marker} {inline(i, links)}" for i in items))
        else:
            blocks.append(inline(para, links))
    return _markup("\n\n".join(blocks))


def _mention_link(text: str, page: str, title: str = "") -> str:
    """Escaped link text (inline markup) to an entry page, marked so that it can be styled, with
    the entry's title as the link's title (what a reader sees before following a bare id)."""
    named = f' title="{_entities(title)}"' if title else ""
    return f"[{text}]({page}){{ .kb-mention{named} }}"


def _linked(text: str, links) -> str:
    """Text outside code spans, escaped, with each whole-word entry mention made a link."""
    if not links:
        return _entities(text)
    out, pos = [], 0
    for word, _, _, start in prose_words(text):
        if word in links:
            out.append(_entities(text[pos:start]))
            out.append(_mention_link(f"<code>{_entities(word)}</code>", *links[word]))
            pos = start + len(word)
    out.append(_entities(text[pos:]))
    return "".join(out)


def entry_links(kb, entry, root) -> dict:
    """Every name another entry goes by (id, aliases as written) -> (the relative address of its
    page, its plain title), for linking mentions in `entry`'s prose; its own names are left out
    (no self-links). Ids and aliases are URL-safe (KB017, KB024), so the address needs no escaping."""
    links = {}
    for other in kb.entries.values():
        if other.id != entry.id:
            for name in (other.id, *other.aliases):
                links[name] = (f"{root}entries/{other.id}.md", plain_title(other.title))
    return links


def plain_title(value) -> str:
    """A title as plain text: code marks dropped, whitespace collapsed."""
    return " ".join(str(value).replace("`", "").split())


PAIR_SIDE_BY_SIDE_CHARS = 44  # the longest line that fits half the content column at 1280 px unwrapped


def pair_layout(pair) -> str:
    """'' (before and after side by side) or 'stacked' when a line is too long for half a column."""
    longest = max((len(line.rstrip()) for side in ("before", "after") for line in pair[side].splitlines()), default=0)
    return "stacked" if longest > PAIR_SIDE_BY_SIDE_CHARS else ""


def meta_description(entry) -> str:
    """An entry page's own meta description: its title and first symptom, plain, at most 300 characters."""
    text = f"{plain_title(entry.title)}. {plain_title(entry.symptoms[0]) if entry.symptoms else ''}".strip()
    return text if len(text) <= 300 else text[:297].rsplit(" ", 1)[0] + "..."


def blockquote(value) -> str:
    """A quote's text as a markdown blockquote, paragraph breaks kept."""
    paras = [str(inline(p)) for p in re.split(r"\n\s*\n", str(value).strip())]
    return _markup("\n>\n".join(f"> {p}" for p in paras))


def fence(code, lang: str = "python") -> str:
    """A fenced code block whose fence is longer than any backtick run inside."""
    code = str(code or "").rstrip()
    longest = max((len(r) for r in re.findall(r"`+", code)), default=0)
    bar = "`" * max(3, longest + 1)
    return _markup(f"{bar}{lang}\n{code}\n{bar}")


def path_part(value) -> str:
    """An id used in a URL or file name: only letters, digits, '.', '_' and '-'."""
    value = str(value)
    if not _SAFE_PART.match(value) or value in (".", ".."):
        raise SiteError(f"'{value}' cannot be used in a URL (letters, digits, '.', '_' and '-' only)")
    return _markup(value)


def attr(value) -> str:
    """Text for an HTML attribute value or raw HTML element content."""
    return _markup(html.escape(str(value), quote=True))


def http_url(value):
    """The URL escaped for an href, or None when it is not plain http(s)."""
    url = str(value or "").strip()
    if not re.match(r"^https?://[^\s<>\"']+$", url):
        return None
    return _markup(html.escape(url, quote=True))


def repo_url(source):
    """The web address of a git capture's file at its commit (GitHub's form for owner/name), or None."""
    from urllib.parse import quote
    if not (source.repo and source.commit and source.repo_path):
        return None
    return http_url(f"https://github.com/{quote(source.repo)}/blob/{quote(source.commit)}/"
                    f"{quote(source.repo_path.lstrip('/'))}")


def front_title(value) -> str:
    """A page title (or description) for the front matter: mkdocs-material prints it unescaped
    into <title>, the meta tags and the nav, so it is HTML-escaped here (and JSON is valid YAML)."""
    text = html.escape(plain_title(value), quote=True)
    return _markup(json.dumps(text))


def slug(value, prefix: str) -> str:
    return _markup(prefix + (re.sub(r"[^a-z0-9]+", "-", str(value).lower()).strip("-") or "x"))


def _finalize(value):
    from markupsafe import Markup
    if isinstance(value, Markup):
        return value
    return "" if value is None else inline(value)


# ---------------------------------------------------------------- inputs

def load_results(path: str | None) -> dict | None:
    """The verified snippet runs (kb/verified/results.json), or None when there is none;
    a malformed file is a SiteError naming file and field."""
    from kb_tools.snippets import verified
    try:
        runs = verified.load_results(path)
    except verified.VerifiedError as exc:
        raise SiteError(str(exc)) from None
    if runs is None or path is None:
        return None
    return {"runs": runs, "dir": os.path.dirname(os.path.abspath(path))}


def _source_lines(kb, source) -> list:
    path = os.path.join(os.path.dirname(kb.root), source.path)
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().splitlines()
    except OSError as exc:
        raise SiteError(f"{source.path}: cannot read the cached source: {exc}") from None


_WORD = re.compile(r"[a-z0-9]+")
_ROLE = re.compile(r":[a-z]+:(?=`)")  # Sphinx roles in docstrings, e.g. :math:`x_n`


def _locate_text(lines: list, text: str):
    """(first, last) lines of a cached source holding a quote's words up to its first
    elision, or None. Package-doc quotes cite an object, not lines; this finds
    them in the cached copy so the citation can still land on the words."""
    head = re.split(r"\[\.\.\.\]|\.\.\.|…", text, maxsplit=1)[0]
    want = _WORD.findall(head.lower())
    if not want:
        return None
    words, where = [], []
    for n, line in enumerate(lines, 1):
        found = _WORD.findall(_ROLE.sub("", line.lower()))
        words += found
        where += [n] * len(found)
    for size in (len(want), min(len(want), 8)):
        probe = want[:size]
        for i in range(len(words) - size + 1):
            if words[i] == probe[0] and words[i:i + size] == probe:
                return where[i], where[i + size - 1]
    return None


def _object_line(lines: list, obj: str):
    """The first line of a package source that names `obj` (full path, else its last part)."""
    for needle in (obj, obj.rsplit(".", 1)[-1]):
        for n, line in enumerate(lines, 1):
            if needle in line:
                return n
    return None


# ---------------------------------------------------------------- rendering

class _Context:
    """Everything the templates need, derived once from the KB."""

    def __init__(self, kb, results):
        # Every rule the pages rely on (known ids, URL-safe names, no clash with the site's own
        # pages) is a coded problem of the loader; the site only refuses a KB that has any.
        if kb.problems:
            raise SiteError(invalid_kb(kb.problems))
        self.kb, self.results = kb, results
        self._shas = {}  # entry id -> sha256 of its snippet as it runs
        self.sources = {}
        for sid, s in sorted(kb.sources.items()):
            self.sources[sid] = {"source": s, "lines": _source_lines(kb, s), "quotes": []}
        self.by_area = {a: [e for e in kb.entries.values() if e.area == a] for a in AREAS}
        for group in self.by_area.values():
            group.sort(key=lambda e: e.id)
        self.quote_users = {q: [] for q in kb.quotes}
        for e in kb.entries.values():
            for qid in e.quote_ids:
                if qid in self.quote_users:
                    self.quote_users[qid].append(e)
        self.citations, self.spans = {}, {}
        for q in sorted(kb.quotes.values(), key=lambda q: q.id):
            src = self.sources[q.source]
            src["quotes"].append(q)
            if q.lines:
                first, last = q.lines
                self.spans[q.id] = (first, last)
                where = f"line {first}" if first == last else f"lines {first}–{last}"
                self.citations[q.id] = (where, first)
            else:
                span = _locate_text(src["lines"], q.text or "")
                self.spans[q.id] = span
                # the object's name, unless the source's own title (printed beside it) is that name
                where = "docstring" if src["source"].title == q.object else f"`{q.object}` docstring"
                if span:
                    where += f", line {span[0]}" if span[0] == span[1] else f", lines {span[0]}–{span[1]}"
                self.citations[q.id] = (where, span[0] if span else _object_line(src["lines"], q.object or ""))
        self.themes = {}
        for q in sorted(kb.quotes.values(), key=lambda q: q.id):
            for theme in (q.themes or ["unthemed"]):
                self.themes.setdefault(theme, []).append(q)
        self.tags = {}
        for e in sorted(kb.entries.values(), key=lambda e: e.id):
            for tag in e.tags:
                self.tags.setdefault(tag, []).append(e)
        self.tag_slugs = _unique_slugs(self.tags, "tag-")
        self.theme_slugs = _unique_slugs(self.themes, "theme-")
        self.triage = [kb.entries[i] for i in TRIAGE_PATH if i in kb.entries] + \
            [e for e in self.by_area["triage"] if e.id not in TRIAGE_PATH]
        self.symptom_groups = symptom_index(self.by_area)
        self.entry_order = entry_order(kb, self.by_area)
        self.redirects = {}
        for e in kb.entries.values():
            for alias in e.aliases:
                for name in dict.fromkeys((alias, alias.lower())):
                    self.redirects[name] = e

    def folklore(self) -> list:
        """[(anchor, heading, quotes)] for /folklore/: each quote once, under the area of the
        first entry that cites it (areas in the site's order, then ids); the headings are the
        area names the rest of the site uses. Quotes no entry cites come last."""
        order = {a: n for n, a in enumerate(AREAS)}
        groups = {}
        for q in sorted(self.kb.quotes.values(), key=lambda q: q.id):
            users = sorted(self.quote_users.get(q.id, []), key=lambda e: (order.get(e.area, len(order)), e.id))
            groups.setdefault(users[0].area if users else None, []).append(q)
        out = [(a, AREA_INFO[a][0], groups[a]) for a in AREAS if a in groups]
        if None in groups:
            out.append(("not-cited", "Not yet behind an entry", groups[None]))
        return out

    def cite_anchor(self, qid: str) -> str:
        """The fragment a citation links to: `L12-L18` for the quote's whole range (the source
        page's script highlights every line of it), `L12` for one line, '' when unknown."""
        span = self.spans.get(qid)
        if span and span[0] != span[1]:
            return f"L{span[0]}-L{span[1]}"
        first = self.citations[qid][1]
        return f"L{first}" if first else ""

    def snippet_status(self, entry) -> dict:
        """What the page says about the snippet's last recorded runs (kb_tools/snippets/verified.py)."""
        return snippet_status(entry, self.results, self.snippet_sha(entry))

    def snippet_sha(self, entry) -> str:
        """The sha256 of the snippet text as it runs, once per entry: runs and curves are both keyed by it."""
        if entry.id not in self._shas:
            from kb_tools.snippets import runner as snippets
            from kb_tools.snippets import verified
            self._shas[entry.id] = verified.snippet_sha256(snippets.script_text(entry))
        return self._shas[entry.id]

    def loss_curves(self, entry):
        """The inline SVG of the bug's and the fix's losses, when the last passing run of this
        very snippet text recorded them; else empty."""
        from kb_tools.snippets import verified
        if not self.results:
            return ""
        try:
            curves = verified.load_curves(self.results["dir"], entry.id)
        except verified.VerifiedError as exc:
            raise SiteError(str(exc)) from None
        if not curves or curves.get("snippet_sha256") != self.snippet_sha(entry):
            return ""
        return _markup(verified.svg(curves, entry.id))


def snippet_status(entry, results: dict | None, sha: str | None = None) -> dict:
    """verified.status for an entry and the recorded runs (load_results); `sha` when already known."""
    from kb_tools.snippets import runner as snippets
    from kb_tools.snippets import verified
    sha = sha or verified.snippet_sha256(snippets.script_text(entry))
    runs = results["runs"] if results else None
    return verified.status(entry.id, sha, runs, distributed=entry.launch == "torchrun")


def _range_anchors(ctx, quotes) -> dict:
    """{first line: [`L<first>-L<last>`, ...]}: the anchor each multi-line citation of a source
    page lands on, so that a link to the whole range is a valid fragment (strict mode checks it)."""
    out = {}
    for q in quotes:
        anchor = ctx.cite_anchor(q.id)
        if "-" in anchor and anchor not in out.get(ctx.spans[q.id][0], []):
            out.setdefault(ctx.spans[q.id][0], []).append(anchor)
    return out


def _unique_slugs(names, prefix: str) -> dict:
    out, used = {}, set()
    for name in names:
        base = str(slug(name, prefix))
        s, n = base, 2
        while s in used:
            s, n = f"{base}-{n}", n + 1
        used.add(s)
        out[name] = _markup(s)
    return out


def _environment(templates: str):
    import jinja2
    env = jinja2.Environment(
        # autoescape makes macros return Markup; finalize does the escaping that matters
        loader=jinja2.FileSystemLoader(templates), autoescape=True, finalize=_finalize,
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True)
    env.filters.update(prose=prose, blockquote=blockquote, fence=fence, path=path_part, attr=attr,
                       http_url=http_url, front_title=front_title, repo_url=repo_url,
                       first_sentence=first_sentence, meta_description=meta_description,
                       pair_layout=pair_layout)
    env.filters["short_line"] = short_line
    env.filters["symptom_lines"] = symptom_lines
    return env


def render_pages(kb, results=None, templates: str | None = None, deploy: dict | None = None) -> dict:
    """Every generated file of the docs folder: relative path -> text. `deploy` is
    `deploy_settings(...)`: it gives entry pages their edit link."""
    deploy = deploy or {}
    templates = templates or os.path.join(project_root(), "site_templates")
    if not os.path.isdir(templates):
        raise SiteError(f"{templates}: no site templates here")
    import jinja2

    from kb_tools.render.sections import page_sections
    from kb_tools.snippets.runner import launch_line
    env = _environment(templates)
    ctx = _Context(kb, results)
    common = {"kb": kb, "ctx": ctx, "areas": AREAS, "area_info": AREA_INFO}
    pages = {}

    def render(name, path, **extra):
        root = _markup("../" * path.count("/"))  # links are relative to the page's file
        try:
            pages[path] = env.get_template(name).render(root=root, **common, **extra)
        except jinja2.TemplateError as exc:
            raise SiteError(f"site_templates/{name}: {exc}") from None

    render("home.md.j2", "index.md")
    render("entries.md.j2", "entries/index.md")
    for area in AREAS:
        render("area.md.j2", f"areas/{area}/index.md", area=area)
    for e in kb.entries.values():
        render("entry.md.j2", f"entries/{e.id}.md", e=e, sections=page_sections(e), launch_line=launch_line(e),
               status=ctx.snippet_status(e),
               links=entry_links(kb, e, "../"), edit_url=edit_url(deploy, e.path), curves=ctx.loss_curves(e))
    render("symptoms.md.j2", "symptoms/index.md")
    for key, heading, areas in ctx.symptom_groups:
        split = symptom_lines(areas) > SYMPTOM_PAGE_LINES
        render("symptom_group.md.j2", f"symptoms/{key}/index.md", key=key, heading=heading, sign_areas=areas, split=split)
        if split:
            for area, items in areas:
                render("symptom_area.md.j2", f"symptoms/{key}/{area}.md", key=key, heading=heading,
                       area=area, items=items)
    render("tags.md.j2", "tags.md")
    render("folklore.md.j2", "folklore.md")
    render("sources.md.j2", "sources/index.md")
    for sid, src in ctx.sources.items():
        quoted = {}
        for q in src["quotes"]:
            span = ctx.spans.get(q.id)
            if span:
                for n in range(span[0], span[1] + 1):
                    quoted.setdefault(n, []).append(q.id)
        render("source.md.j2", f"sources/{sid}.md", sid=sid, src=src["source"], lines=src["lines"],
               quotes=src["quotes"], quoted=quoted, range_anchors=_range_anchors(ctx, src["quotes"]))
    for name, e in sorted(ctx.redirects.items()):
        render("redirect.html.j2", f"{name}/index.html", alias=name, e=e, site_url=deploy.get("site_url"))
    for name in STATIC:
        with open(os.path.join(templates, name), encoding="utf-8") as fh:
            pages[f"stylesheets/{name}"] = fh.read()
    for name in SCRIPTS:
        with open(os.path.join(templates, name), encoding="utf-8") as fh:
            pages[f"javascripts/{name}"] = fh.read()
    pages[NAMES_FILE] = names_table(kb)
    from kb_tools.site.search_export import files as search_files  # the search index, its JS, the token table (bytes)
    pages.update(search_files(kb, templates))
    return pages


def names_table(kb) -> str:
    """JSON for the 404 page: every id and alias -> its entry's id, and each entry's title."""
    names = {e.id: e.id for e in kb.entries.values()}
    for e in kb.entries.values():
        for alias in e.aliases:
            names.setdefault(alias, e.id)
    titles = {e.id: plain_title(e.title) for e in kb.entries.values()}
    return json.dumps({"names": dict(sorted(names.items())), "titles": dict(sorted(titles.items()))},
                      ensure_ascii=False, separators=(",", ":"))


def _check_url(value, option: str):
    """An http(s) URL ending in '/', or None for none; SiteError naming the option otherwise."""
    if value is None or str(value).strip() == "":
        return None
    url = str(value).strip()
    if not re.match(r"^https?://[^\s<>\"'#?]+$", url):
        raise SiteError(f"{option} {url!r}: expected an http:// or https:// address without spaces, query or fragment")
    return url if url.endswith("/") else url + "/"


def deploy_settings(site_url=None, repo_url=None, edit_uri=None) -> dict:
    """Where the site will live and where its KB is edited, checked once.

    site_url: the address the site is served from (sub-path allowed); mkdocs then writes
    absolute URLs into sitemap.xml and a canonical link into every page, and the 404 page
    loads its assets from that path. repo_url + edit_uri: each entry page links to its YAML
    file at repo_url + edit_uri + path (GitHub: `edit/<branch>/`); no link without repo_url.
    Each falls back to the environment (KB_SITE_URL, KB_REPO_URL, KB_EDIT_URI)."""
    env = os.environ.get
    site_url = _check_url(site_url if site_url is not None else env("KB_SITE_URL"), "--site-url")
    repo_url = _check_url(repo_url if repo_url is not None else env("KB_REPO_URL"), "--repo-url")
    edit_uri = edit_uri if edit_uri is not None else env("KB_EDIT_URI", DEFAULT_EDIT_URI)
    edit_uri = str(edit_uri).strip().strip("/")
    if not re.match(r"^[A-Za-z0-9._/-]*$", edit_uri) or ".." in edit_uri.split("/"):
        raise SiteError(f"--edit-uri {edit_uri!r}: expected a path such as edit/main/ (letters, digits, '.', '_', '-', '/')")
    return {"site_url": site_url, "repo_url": repo_url, "edit_uri": edit_uri + "/" if edit_uri else ""}


def deploy_notes(deploy: dict) -> list:
    """One line per thing a build leaves out for want of an address, naming what adds it."""
    missing = []
    if not deploy.get("site_url"):
        missing.append("no sitemap and no canonical links (--site-url URL or KB_SITE_URL)")
    if not deploy.get("repo_url"):
        missing.append("no 'Edit this entry' links (--repo-url URL or KB_REPO_URL)")
    return ["not set for deployment: " + "; ".join(missing)] if missing else []


# Without a site URL mkdocs writes the 404 page with addresses from the domain root, so under a
# sub-path it would load no style and no script. This finds the site's root at run time (the first
# folder up the address that holds the names table) and makes every address relative to it.
_ROOT_PROBE = ("<script>(function () {{ var parts = location.pathname.split('/').slice(0, -1);"
               " for (var i = 1; i <= parts.length; i++) {{ var root = parts.slice(0, i).join('/') + '/';"
               " var x = new XMLHttpRequest(); try {{ x.open('HEAD', root + '{probe}', false); x.send();"
               " if (x.status === 200) {{ document.write('<base href=\"' + root + '\">'); return; }} }}"
               " catch (e) {{}} }} }})();</script>")


def _without_site_url(site_dir: str) -> None:
    """A build with no site URL: no empty sitemap, and a 404 page that works under any path."""
    for name in ("sitemap.xml", "sitemap.xml.gz"):
        path = os.path.join(site_dir, name)
        if os.path.exists(path):
            os.remove(path)
    page = os.path.join(site_dir, "404.html")
    if not os.path.exists(page):
        return
    with open(page, encoding="utf-8") as fh:
        text = fh.read()
    text = re.sub(r'((?:href|src)=")/(?!/)', r"\1", text)
    text = text.replace('"base": "/"', '"base": "."')
    text = re.sub(r"<head>", lambda m: m.group(0) + _ROOT_PROBE.format(probe=NAMES_FILE), text, count=1)
    write_atomic(page, text)


def edit_url(deploy: dict, path: str):
    """The address that edits the file at `path` (relative to the repository root), or None."""
    from urllib.parse import quote
    if not deploy.get("repo_url"):
        return None
    return http_url(deploy["repo_url"] + deploy.get("edit_uri", "") + quote(path.replace(os.sep, "/").lstrip("/")))


def nav(kb) -> list:
    """The site navigation: areas as sections, each opening on its index page; entries under
    their id (a title is a sentence, too long for a menu), triage in checklist order."""
    by_area = {a: sorted((e for e in kb.entries.values() if e.area == a), key=lambda e: e.id) for a in AREAS}
    order = entry_order(kb, by_area)
    areas = []
    for area in AREAS:
        ids = [e.id for e in order if e.area == area]
        areas.append({AREA_INFO[area][0]: [f"areas/{area}/index.md"] + [{i: f"entries/{i}.md"} for i in ids]})
    return [
        {"Home": "index.md"},
        {"Entries": ["entries/index.md"] + areas},
        {"Symptoms": ["symptoms/index.md"] + [{heading: f"symptoms/{key}/index.md"}
                                             for key, heading, _ in symptom_index(by_area)]},
        {"Tags": "tags.md"},
        {"Folklore": "folklore.md"},
        {"Sources": ["sources/index.md"] + [f"sources/{s}.md" for s in sorted(kb.sources)]},
    ]


# ---------------------------------------------------------------- indexes

# What a user sees, the headings of the symptom index: (key, heading, rule over a symptom's text).
# A symptom goes under the first sign whose rule matches, so the order is the priority: an error
# message or a NaN names the failure more precisely than "validation" or "flat" in the same line.
SYMPTOM_SIGNS = (
    ("error", "An error message or warning",
     r"\b[A-Z][A-Za-z]*(?:Error|Exception|Warning)\b|(?i:\berror:|\bwarning:|\btraceback\b|device-side assert)"),
    ("nan", "NaN or inf",
     r"\bnans?\b|\binfs?\b|non-?finite|overflow"),
    ("diverges", "Loss spikes or diverges",
     r"spik|diverg|explod|blows? up|unstable|instabilit|oscillat|jumps? (?:up|to)|sawtooth|shoots? up"
     r"|(?<!validation )(?<!val )loss (?:increases|goes up|rises|grows)|gets worse"),
    ("chance", "Accuracy at chance, or the same prediction for every input",
     r"\bchance\b|predicts? a constant|predictions constant|constant (?:prediction|output)"
     r"|same (?:output|prediction|class|answer|value for every)|always predicts"
     r"|predicts? (?:only|all|the same|one)\b|majority class|largest class|most frequent class|rare class"
     r"|minority class|all background|random guess|all predictions|every prediction is|almost never predicts"
     r"|almost the same \w+ for every|random tokens|nonsense|everywhere"),
    ("validation", "Validation, evaluation or inference differ from training",
     r"\bval\b|validation|\beval\b|evaluat|\btest (?:set|accuracy|loss|batch)|inference|generat|held-out"
     r"|too good|\bserved\b|serving|greedy sampling|reload|keeps going|never stops|rambles|role-plays"
     r"|continues the (?:user|conversation)|llama\.cpp|vllm|ollama"),
    ("resources", "Slow steps, memory or hangs",
     r"out of memory|\boom\b|\bmemory\b|\bhangs?\b|deadlock|\bit/s\b|throughput|step time|GPU idle"),
    ("flat", "Loss flat, slow, or weights not changing",
     r"\bflat|plateau|stuck|stall|barely|crawl|floor|does nothing|\bslow|converge"
     r"|(?:never|not|n't|stops?) (?:decreas|go|chang|mov|improv|drop|learn|train|fall)"
     r"|no (?:progress|improvement|learning)|unchanged|identical|same value|exactly the same|still exactly"
     r"|cannot overfit|learns (?:much )?less|underperform|mediocre|no better than|from scratch|stays (?:at|exactly)"),
)
OTHER_SIGN = ("other", "Other signs and questions")
# case matters only for the error rule: a CamelCase exception name, not any word ending in "error"
_SIGN_RULES = [(key, re.compile(rule, re.I if key != "error" else 0)) for key, _, rule in SYMPTOM_SIGNS]
_HEADINGS = [(key, heading) for key, heading, _ in SYMPTOM_SIGNS] + [OTHER_SIGN]
SHORT_LINE = 120  # characters of a symptom shown in an index; the entry page has all of it


def symptom_sign(text: str) -> str:
    """The key of what a symptom shows (SYMPTOM_SIGNS), "other" when no rule matches."""
    for key, rule in _SIGN_RULES:
        if rule.search(text):
            return key
    return OTHER_SIGN[0]


def short_line(text, limit: int = SHORT_LINE) -> str:
    """One line of at most `limit` characters, cut at a word boundary with an ellipsis: long
    symptom paragraphs make an index unreadable."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    if " " in cut:
        cut = cut[:cut.rindex(" ")]
    return cut.rstrip(" ,;:.-(") + "…"


# The order /symptoms/ shows the signs in: what people arrive with first (a flat loss, a NaN, accuracy
# at chance, a validation gap), not the order SYMPTOM_SIGNS tries its rules in.
ARRIVAL_ORDER = ("flat", "nan", "chance", "validation", "diverges", "error", "resources", "other")
# A sign with more symptoms than this gets a page per area, so that every symptom page stays
# small (tests/test_site.py holds each under 50 KB of HTML).
SYMPTOM_PAGE_LINES = 48


def symptom_index(by_area: dict) -> list:
    """[(sign key, heading, [(area, [(symptom, entry, its 1-based number)])])] in ARRIVAL_ORDER,
    areas in AREAS order; only signs and areas that have symptoms."""
    groups = {key: {a: [] for a in AREAS} for key, _ in _HEADINGS}
    for area in AREAS:
        for e in by_area[area]:
            for n, s in enumerate(e.symptoms, 1):
                groups[symptom_sign(s)][area].append((s, e, n))
    headings = dict(_HEADINGS)
    out = []
    for key in ARRIVAL_ORDER:
        areas = [(a, items) for a, items in groups[key].items() if items]
        if areas:
            out.append((key, headings[key], areas))
    return out


def symptom_lines(areas) -> int:
    return sum(len(items) for _, items in areas)


def entry_order(kb, by_area: dict) -> list:
    """Every entry, for the entries table and the nav: the first-hour checklist in its order,
    then the other areas in AREAS order, by id within each."""
    triage = [kb.entries[i] for i in TRIAGE_PATH if i in kb.entries]
    return triage + [e for a in AREAS for e in by_area[a] if e not in triage]


# ---------------------------------------------------------------- files

def _write(path: str, text) -> bool:
    """Write text (str) or bytes atomically, and only when the content changed (keeps live reload quiet)."""
    data = text if isinstance(text, bytes) else text.encode("utf-8")
    try:
        with open(path, "rb") as fh:
            if fh.read() == data:
                return False
    except OSError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, text)
    return True


def _outside_kb(kb, directory: str, what: str) -> None:
    """Refuse a work or output folder inside the KB or its evidence: mkdocs.yml and pages
    written there would become part of the KB (or be read as entries); and one inside
    an installed package."""
    from kb_tools.core.locate import bundled_kb, evidence_dir
    if bundled_kb(directory):
        raise SiteError(f"{directory}: inside the installed package; run kb build from a checkout "
                        f"or pass --out and --work")
    real = os.path.realpath(directory)
    for top in (kb.root, evidence_dir(kb.root)):
        top = os.path.realpath(top)
        if real == top or real.startswith(top + os.sep):
            raise SiteError(f"{directory}: inside the KB ({top}); choose a {what} folder outside it")


def _claimable(directory: str, marker: str, what: str) -> None:
    """Refuse a non-empty folder this tool did not create: it is never filled, cleaned or replaced."""
    if os.path.isdir(directory) and os.listdir(directory) and not os.path.exists(os.path.join(directory, marker)):
        raise SiteError(f"{directory}: not empty and not made by kb build; refusing to use it as the {what} folder")


def _claim(directory: str, marker: str, what: str) -> None:
    """Create `directory` (or take one this tool made) and mark it as made by kb build."""
    _claimable(directory, marker, what)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, marker), "w") as fh:
        fh.write("generated by kb build; safe to delete\n")


def write_docs(docs_dir: str, pages: dict) -> int:
    """Make docs_dir hold exactly `pages`; returns how many files changed."""
    changed = sum(_write(os.path.join(docs_dir, rel), text) for rel, text in pages.items())
    keep = {os.path.normpath(os.path.join(docs_dir, rel)) for rel in pages}
    for dirpath, _, filenames in os.walk(docs_dir, topdown=False):
        for f in filenames:
            p = os.path.normpath(os.path.join(dirpath, f))
            if p not in keep:
                os.remove(p)
                changed += 1
        if dirpath != docs_dir and not os.listdir(dirpath):
            os.rmdir(dirpath)
    return changed


def generate(kb, work_dir: str, results_path: str | None = None, templates: str | None = None,
             base_config: str | None = None, deploy: dict | None = None) -> str:
    """Write <work>/docs, <work>/theme and <work>/mkdocs.yml for this KB; returns the config path."""
    base_config = base_config or os.path.join(project_root(), "mkdocs.yml")
    if not os.path.isfile(base_config):
        raise SiteError(f"{base_config}: not found")
    templates = templates or os.path.join(project_root(), "site_templates")
    deploy = deploy or deploy_settings()
    pages = render_pages(kb, load_results(results_path), templates, deploy)
    work_dir = os.path.abspath(work_dir)
    _outside_kb(kb, work_dir, "work")
    _claim(work_dir, WORK_MARKER, "work")
    write_docs(os.path.join(work_dir, "docs"), pages)
    import yaml
    write_theme(templates, os.path.join(work_dir, THEME_DIR))
    config = {"INHERIT": os.path.relpath(base_config, work_dir), "docs_dir": "docs", "nav": nav(kb),
              "theme": {"name": "material", "custom_dir": THEME_DIR}}
    if deploy.get("site_url"):
        config["site_url"] = deploy["site_url"]
    path = os.path.join(work_dir, "mkdocs.yml")
    _write(path, "# Generated by kb build; edit the project's mkdocs.yml instead.\n"
           + yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    return path


def write_theme(templates: str, theme_dir: str) -> None:
    """Copy the theme override (site_templates/theme/: the 404 page) into the work folder;
    mkdocs renders it as a theme template, so it is copied, not rendered here."""
    source = os.path.join(templates, THEME_DIR)
    pages = {}
    if os.path.isdir(source):
        for name in sorted(os.listdir(source)):
            if name.endswith(".html"):
                with open(os.path.join(source, name), encoding="utf-8") as fh:
                    pages[name] = fh.read()
    write_docs(theme_dir, pages)


# ---------------------------------------------------------------- build and serve

@dataclass
class BuildReport:
    """What `kb build` made, for its summary line and `--json`."""

    out: str
    seconds: float
    pages: int
    entries: int
    sources: int
    quotes: int
    redirects: int
    warnings: list
    notes: list = field(default_factory=list)  # what this build leaves out, and the option that adds it

    def to_dict(self) -> dict:
        return asdict(self)


class _Collect:
    """A logging handler that keeps mkdocs' warnings for the error message."""

    def __init__(self):
        import logging
        self.messages = []
        self.handler = logging.Handler(logging.WARNING)
        self.handler.emit = lambda record: self.messages.append(record.getMessage())


def _quiet_mkdocs():
    # mkdocs-material prints a banner about MkDocs 2.0 on every build; it is noise here.
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")


def default_work_dir() -> str:
    # a folder named "site": tools that skip build output (and the own-words check) skip it
    return os.path.join(project_root(), "build", "site")


def default_out_dir() -> str:
    return os.path.join(project_root(), "site")


def default_results(kb) -> str:
    """kb/verified/results.json of the KB (committed; the snippet test run writes it). For the
    copy of the shipped KB bundled in the package, the one in the project checkout if any."""
    from kb_tools.snippets import verified
    root = kb.root
    if os.path.dirname(root) == os.path.join(PACKAGE_DIR, "_data"):
        try:
            checkout = os.path.join(project_root(), "kb")
            if os.path.isfile(os.path.join(verified.default_dir(checkout), verified.RESULTS_FILE)):
                root = checkout
        except SiteError:
            pass
    return os.path.join(verified.default_dir(root), verified.RESULTS_FILE)


def build_site(kb, out_dir: str | None = None, work_dir: str | None = None,
               results_path: str | None = None, templates: str | None = None,
               base_config: str | None = None, site_url: str | None = None,
               repo_url: str | None = None, edit_uri: str | None = None) -> BuildReport:
    """Generate the pages and run a strict mkdocs build into out_dir (see `deploy_settings`
    for site_url, repo_url and edit_uri).

    The site is built in a new folder beside out_dir and swapped in when complete, so an
    interrupted or failed build leaves the previous site as it was; the work folder is
    locked for the build, so a second build using it stops with one line instead of
    rewriting the pages under the first one.
    """
    deploy = deploy_settings(site_url, repo_url, edit_uri)
    start = time.perf_counter()
    out_dir = os.path.abspath(out_dir or default_out_dir())
    work_dir = os.path.abspath(work_dir or default_work_dir())
    if results_path is None:
        results_path = default_results(kb)
    _outside_kb(kb, out_dir, "output")
    _outside_kb(kb, work_dir, "work")  # before the lock file is made there
    new = None
    try:
        _claimable(out_dir, SITE_MARKER, "output")
        if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
            raise SiteError(f"{out_dir}: cannot write there: not a folder")
        _claim(work_dir, WORK_MARKER, "work")
        lock = _lock(work_dir)
    except OSError as exc:
        raise _unwritable(exc) from None
    try:
        try:
            config_file = generate(kb, work_dir, results_path, templates, base_config, deploy)
            os.makedirs(os.path.dirname(out_dir), exist_ok=True)
            new = _beside(out_dir, "build")
            os.mkdir(new)  # not mkdtemp: the site gets the usual permissions, not owner-only
            _claim(new, SITE_MARKER, "output")
        except OSError as exc:
            raise _unwritable(exc) from None
        warnings = _mkdocs_build(config_file, new, out_dir)
        try:
            if not deploy["site_url"]:
                _without_site_url(new)
            write_agent_files(kb, new, load_results(results_path))
            pages = sum(1 for _, _, files in os.walk(new) for f in files if f.endswith(".html"))
            _swap_in(new, out_dir)
            new = None
        except OSError as exc:
            raise _unwritable(exc, new, out_dir) from None
    finally:
        if new is not None:
            import shutil
            shutil.rmtree(new, ignore_errors=True)
        if lock is not None:
            lock.close()
    return BuildReport(out=out_dir, seconds=round(time.perf_counter() - start, 2), pages=pages,
                       entries=len(kb.entries), sources=len(kb.sources), quotes=len(kb.quotes),
                       redirects=sum(1 for e in kb.entries.values() for _ in e.aliases),
                       warnings=warnings, notes=deploy_notes(deploy))


def _mkdocs_build(config_file: str, site_dir: str, out_dir: str) -> list:
    """A strict mkdocs build of `config_file` into `site_dir`; mkdocs' warnings. A failure is one
    line (SiteError) naming `out_dir`, the folder the user asked for, not the temporary one."""
    _quiet_mkdocs()
    import logging

    from mkdocs import exceptions
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    log = logging.getLogger("mkdocs")
    collect = _Collect()
    old_level, old_propagate = log.level, log.propagate
    log.addHandler(collect.handler)
    log.setLevel(logging.WARNING)
    log.propagate = False
    try:
        config = load_config(config_file=config_file, site_dir=site_dir, strict=True)
        build(config)
    except (exceptions.MkDocsException, SystemExit) as exc:
        detail = "; ".join(collect.messages[:5]) or str(exc)
        more = f" (and {len(collect.messages) - 5} more)" if len(collect.messages) > 5 else ""
        raise SiteError(f"mkdocs build failed in strict mode: {detail}{more}") from None
    except OSError as exc:
        raise _unwritable(exc, site_dir, out_dir) from None
    finally:
        log.removeHandler(collect.handler)
        log.setLevel(old_level)
        log.propagate = old_propagate
    return collect.messages


def _beside(path: str, what: str) -> str:
    """A fresh name next to `path` (same folder, so a rename is atomic), hidden, naming this process."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.kb-{what}-{os.getpid()}-{os.urandom(4).hex()}")


def _swap_in(new: str, out: str) -> None:
    """Make the finished site `new` (a folder beside `out`) the one at `out`, by renames: the old
    site is renamed aside, the new one in, and the old one removed after. Readers never see half
    a site; builds swapping in at once leave one of their sites, whole."""
    import errno
    import shutil
    aside = []
    try:
        for _ in range(100):
            try:
                os.rename(new, out)  # atomic; refused while `out` is a folder with files in it
                return
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
            old = _beside(out, "old")
            try:
                os.rename(out, old)
                aside.append(old)
            except FileNotFoundError:
                pass  # another build moved it aside first
        raise SiteError(f"{out}: other builds kept replacing it; build again")
    except BaseException:
        if aside and not os.path.lexists(out):
            os.rename(aside.pop(), out)  # stopped between the two renames: the previous site goes back
        raise
    finally:
        for old in aside:
            shutil.rmtree(old, ignore_errors=True)


def _lock(work_dir: str):
    """The work folder's build lock (an open file; closing it, or the process ending, releases it),
    or None where there is no flock. Another build holding it is a one-line SiteError."""
    try:
        import fcntl
    except ImportError:
        return None
    path = os.path.join(work_dir, BUILD_LOCK)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                 | getattr(os, "O_CLOEXEC", 0), 0o666)
    fh = open(fd, "r+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = fh.read(20).strip()
        fh.close()
        raise SiteError(f"{work_dir}: another kb build is using this work folder"
                        f"{f' (process {holder})' if holder.isdigit() else ''}; wait for it to finish, "
                        f"or pass another --work") from None
    fh.truncate(0)
    fh.write(f"{os.getpid()}\n")
    fh.flush()
    return fh


def write_agent_files(kb, out_dir: str, results: dict | None = None) -> None:
    """llms.txt at the site root and a plain-Markdown copy of every entry under md/, for agents
    (written after mkdocs, which would otherwise render the .md files as pages); each copy carries
    its evidence (quotes with source and lines) and where its snippet last passed."""
    from kb_tools.render.agents import llms_txt
    from kb_tools.render.markdown import entry_markdown
    os.makedirs(os.path.join(out_dir, "md"), exist_ok=True)
    for entry in kb.entries.values():
        status = snippet_status(entry, results)
        line = f"Verified: {status['title']}" + (f" on {status['date']}" if status.get("date") else "") + "."
        write_atomic(os.path.join(out_dir, "md", f"{entry.id}.md"), entry_markdown(entry, status=line, kb=kb))
    write_atomic(os.path.join(out_dir, "llms.txt"), llms_txt(kb))


def _unwritable(exc: OSError, building: str | None = None, out: str | None = None) -> SiteError:
    """A folder or file of the build that cannot be made or written, in one line; a path in the
    site being built (`building`) is named as it will be under `out`."""
    name = str(exc.filename or "the site")
    if building and out and (name == building or name.startswith(building + os.sep)):
        name = out + name[len(building):]
    return SiteError(f"{name}: cannot write there: {exc.strerror or exc}")


def _watched(kb_root: str, templates: str, results_path: str) -> tuple:
    """Changes when the KB, its evidence, a template or the snippet results change."""
    from kb_tools.core.locate import kb_signature, scan_files, stat_key
    return (kb_signature(kb_root),
            tuple(stat_key(p) for p in scan_files(templates, (".j2", ".css", ".js", ".html")) + [results_path]))


def serve_site(kb_root: str, work_dir: str | None = None, results_path: str | None = None,
               dev_addr: str = "127.0.0.1:8000", templates: str | None = None, log=print) -> None:
    """Preview with live reload: regenerate pages whenever the KB, the evidence, the
    templates or the snippet results change; mkdocs reloads the browser."""
    import threading

    from kb_tools.core.load import load_kb

    templates = templates or os.path.join(project_root(), "site_templates")
    work_dir = os.path.abspath(work_dir or default_work_dir())
    host, port = _parse_addr(dev_addr)
    _check_free(host, port)
    kb = load_kb(kb_root)
    if kb.problems:
        raise SiteError(invalid_kb(kb.problems))
    results_path = results_path or default_results(kb)
    try:
        config_file = generate(kb, work_dir, results_path, templates)
    except OSError as exc:
        raise _unwritable(exc) from None
    stop = threading.Event()

    def watch():
        seen = _watched(kb.root, templates, results_path)
        while not stop.wait(1.0):
            now = _watched(kb.root, templates, results_path)
            if now == seen:
                continue
            seen = now
            try:
                fresh = load_kb(kb.root)
                if fresh.problems:
                    log(f"kb serve: not regenerating: {invalid_kb(fresh.problems)}")
                    continue
                generate(fresh, work_dir, results_path, templates)
                log("kb serve: pages regenerated")
            except SiteError as exc:
                log(f"kb serve: {exc}")

    thread = threading.Thread(target=watch, name="kb-site-watch", daemon=True)
    thread.start()
    _quiet_mkdocs()
    from mkdocs.commands.serve import serve
    log(f"kb serve: http://{host if ':' not in host else f'[{host}]'}:{port}/ (Ctrl-C stops)")
    try:
        serve(config_file=config_file, dev_addr=dev_addr, livereload=True)
    except OSError as exc:
        raise SiteError(f"cannot serve on {dev_addr}: {exc.strerror or exc}") from None
    finally:
        stop.set()


def _parse_addr(dev_addr: str) -> tuple:
    """(host, port) of HOST:PORT, or SiteError naming what is wrong."""
    host, sep, port = (dev_addr or "").rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SiteError(f"--dev-addr {dev_addr!r}: expected HOST:PORT with a port from 1 to 65535")
    return host, int(port)


def _check_free(host: str, port: int) -> None:
    """SiteError in one line if HOST:PORT cannot be listened on (busy, or not this machine's)."""
    import socket
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will
            sock.bind(infos[0][4])
    except OSError as exc:
        raise SiteError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
