"""The docs site: generated pages, strict mkdocs build, escaping, and counts against the KB.

The fixture KB (tests/fixtures/site) is built once per module through `kb build`;
the shipped KB is built once too, and every entry, source and quote in it must
appear on the site.
"""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from html.parser import HTMLParser

import pytest

from kb_tools import cli
from kb_tools.search import rank as search_rank
from kb_tools.site import build as site
from kb_tools.core.load import load_kb
from kbfactory import entry, make_kb, write_entry

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
FIXTURE = os.path.join(HERE, "fixtures", "site")
FIXTURE_KB = os.path.join(FIXTURE, "kb")
# The entry page's sections, in the order a person mid-debug reads (render/sections.py PAGE_ORDER).
SECTIONS = ["Symptoms", "Why it happens", "Fix", "How to check", "Caveats", "See also", "Evidence", "Snippet"]
GPU = "NVIDIA H100 80GB HBM3"
# One xdist worker runs the module, so the shipped and the fixture site are each built once.
pytestmark = pytest.mark.xdist_group("site")


def write_verified(directory, kb) -> str:
    """A verified-runs record for the fixture KB: overfit-one-batch passed on CPU and a GPU (with
    curves), lr-too-low failed after an earlier pass, double-softmax passed in an earlier version,
    ddp-no-sync-accumulation never ran."""
    from kb_tools.snippets import runner as snippets
    from kb_tools.snippets import verified

    def run(eid, outcome, sha=None, day="2026-11-20"):
        return {"outcome": outcome, "date": f"{day}T10:00:00Z", "torch": "2.13.0+cpu", "python": "3.11.7",
                "snippet_sha256": sha or verified.snippet_sha256(snippets.script_text(kb.entries[eid]))}
    path = verified.record({("overfit-one-batch", "cpu"): run("overfit-one-batch", "passed"),
                            ("overfit-one-batch", GPU): run("overfit-one-batch", "passed"),
                            ("lr-too-low", "cpu"): run("lr-too-low", "passed", day="2026-11-19"),
                            ("double-softmax", "cpu"): run("double-softmax", "passed", sha="0" * 64)}, str(directory))
    verified.record({("lr-too-low", "cpu"): run("lr-too-low", "failed")}, str(directory))
    sha = verified.snippet_sha256(snippets.script_text(kb.entries["overfit-one-batch"]))
    verified.write_curves(str(directory), "overfit-one-batch",
                          {"bug": [[0, 2.3], [1, 2.3], [2, float("nan")], [3, 2.29]], "fix": [[0, 2.3], [1, 0.9], [2, 0.01]]},
                          sha, "2.13.0+cpu")
    return path


# ---------------------------------------------------------------- a small DOM for assertions

class Node:
    __slots__ = ("tag", "attrs", "children", "parent")

    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.children, self.parent = tag, attrs, [], parent

    def iter(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def find_all(self, tag=None, **attrs):
        return [n for n in self.iter() if (tag is None or n.tag == tag)
                and all(attr_has(n, k.rstrip("_"), v) for k, v in attrs.items())]

    def by_id(self, ident):
        return next((n for n in self.iter() if n.attrs.get("id") == ident), None)


def attr_has(node, name, value):
    got = node.attrs.get(name)
    if got is None:
        return False
    return value in got.split() if name == "class" else got == value


class _Tree(HTMLParser):
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Node("#root", {}, None)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: v or "" for k, v in attrs}, self.cur)
        self.cur.children.append(node)
        if tag not in self.VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, {k: v or "" for k, v in attrs}, self.cur))

    def handle_endtag(self, tag):
        node = self.cur
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.cur = node.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def page(site_dir, url_path) -> Node:
    """The parsed HTML of a site URL path like 'entries/x/'."""
    path = os.path.join(site_dir, url_path.split("#")[0])
    if path.endswith("/"):
        path += "index.html"
    tree = _Tree()
    with open(path, encoding="utf-8") as fh:
        tree.feed(fh.read())
    return tree.root


def content(root) -> Node:
    """The article body, without theme chrome (nav, header, search)."""
    return next(n for n in root.iter() if attr_has(n, "class", "md-content"))


def norm(text: str) -> str:
    return " ".join(text.split())


def rendered(text: str) -> str:
    """What a YAML string looks like once rendered: code-span backticks drop away."""
    return norm(re.sub(r"`+", "", text))


# ---------------------------------------------------------------- builds

@pytest.fixture(scope="module")
def fixture_site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fixture-site")
    results = write_verified(tmp / "verified", load_kb(FIXTURE_KB, use_cache=False))
    out = tmp / "site"
    code = cli.main(["--kb", FIXTURE_KB, "build", "--out", str(out), "--work", str(tmp / "src"),
                     "--results", str(results)])
    assert code == 0
    return str(out), load_kb(FIXTURE_KB, use_cache=False)


@pytest.fixture(scope="module")
def shipped_site(tmp_path_factory):
    kb = load_kb(os.path.join(REPO, "kb"), use_cache=False)
    assert not kb.problems, "\n".join(map(str, kb.problems))
    tmp = tmp_path_factory.mktemp("shipped-site")
    report = site.build_site(kb, out_dir=str(tmp / "site"), work_dir=str(tmp / "src"))
    return report, kb


# ---------------------------------------------------------------- escaping helpers

def test_inline_turns_every_control_character_into_an_entity():
    out = str(site.inline("<b>x</b> **y** _z_ [a](b) # c | d `e<f>`"))
    assert "<b>" not in out and "*" not in out and "[" not in out and "|" not in out and "#" not in out.replace("&#", "")
    assert "<code>e&#60;f&#62;</code>" in out
    assert html.unescape(re.sub(r"</?code>", "", out)) == "<b>x</b> **y** _z_ [a](b) # c | d e<f>"


def test_prose_keeps_paragraphs_and_lists():
    out = str(site.prose("First para\ncontinues.\n\n- one\n- two\n  more\n\n1. a\n2. b"))
    blocks = out.split("\n\n")
    assert len(blocks) == 3
    assert blocks[0].startswith("First para continues")
    assert blocks[1].splitlines() == ["- one", "- two more"]
    assert blocks[2].splitlines() == ["1. a", "1. b"]


def test_fence_outgrows_backticks_inside_the_code():
    out = str(site.fence("a = 1\n# ````` five\n"))
    assert out.startswith("``````python\n") and out.endswith("\n``````")


def test_unsafe_values_are_refused_or_dropped():
    with pytest.raises(site.SiteError):
        site.path_part("../etc")
    with pytest.raises(site.SiteError):
        site.path_part("a b")
    assert site.http_url("javascript:alert(1)") is None
    assert site.http_url("https://x.org/a?b=1&c=\"2\"") is None
    assert str(site.http_url("https://x.org/a?b=1&c=2")) == "https://x.org/a?b=1&amp;c=2"
    assert json.loads(str(site.front_title("<b>`x`</b>"))) == "&lt;b&gt;x&lt;/b&gt;"


def test_package_quote_is_located_by_its_words_up_to_the_elision():
    lines = ["---", "title: x", "---", "Intro line.", "The `input` is expected to contain",
             "the *unnormalized* logits for each class.", "Other text."]
    assert site._locate_text(lines, "The input is expected to contain the unnormalized logits [...] more") == (5, 6)
    assert site._locate_text(lines, "words the author never wrote") is None


# ---------------------------------------------------------------- the fixture site

def test_entry_pages_have_every_section_in_order(fixture_site):
    out, kb = fixture_site
    for e in kb.entries.values():
        body = content(page(out, f"entries/{e.id}/"))
        assert [norm(h.text()).rstrip("¶").strip() for h in body.find_all("h2")] == SECTIONS, e.id
        # the H1 is the plain title; the ids to type sit under it, then what to do and the badge
        h1 = body.find_all("h1")
        assert len(h1) == 1 and norm(h1[0].text()).rstrip("¶").strip() == rendered(e.title)
        (ids,) = body.find_all("p", class_="kb-ids")
        assert [c.text() for c in ids.find_all("code")] == [e.id, *e.aliases]
        assert ids.find_all("a")[-1].attrs["href"] == f"../../md/{e.id}.md"
        (todo,) = body.find_all("p", class_="kb-todo")
        assert norm(todo.text()).startswith("What to do: " + rendered(site.first_sentence(e.fix)))
        (badge,) = body.find_all("p", class_="kb-badge")
        assert badge.find_all("a")[0].attrs["href"] == "#snippet"
        items = body.find_all("li", class_="kb-symptom")
        assert [rendered(h.text()) for h in items] == [rendered(s) for s in e.symptoms]


def test_correction_shown_only_when_present(fixture_site):
    out, kb = fixture_site
    for e in kb.entries.values():
        text = norm(content(page(out, f"entries/{e.id}/")).text())
        assert ("Correction to common advice" in text) == bool(e.correction), e.id
        if e.correction:
            assert rendered(e.correction) in text


def test_snippet_block_and_its_run_results(fixture_site):
    out, kb = fixture_site
    for e in kb.entries.values():
        body = content(page(out, f"entries/{e.id}/"))
        pairs = body.find_all("div", class_="kb-fix-pair")  # the fix pair's two blocks are not the snippet
        code = [b for b in body.find_all("div", class_="highlight") if not any(b in p.iter() for p in pairs)]
        assert len(code) == 1 and code[0].find_all("code")[0].text().strip() == e.snippet.strip()
    passed = norm(content(page(out, "entries/overfit-one-batch/")).text())
    assert "Passed on cpu, NVIDIA H100 80GB HBM3 with torch 2.13.0+cpu" in passed
    assert "cpu: passed on 2026-11-20 10:00 UTC, torch 2.13.0+cpu, Python 3.11.7" in passed
    failed = norm(content(page(out, "entries/lr-too-low/")).text())
    assert "Failed on cpu with torch 2.13.0+cpu" in failed and "last passed on 2026-11-19 10:00 UTC" in failed
    changed = norm(content(page(out, "entries/double-softmax/")).text())
    assert "Changed since it last passed" in changed and "earlier version of the snippet" in changed
    never = norm(content(page(out, "entries/ddp-no-sync-accumulation/")).text())
    assert "Never passed" in never
    kinds = {eid: next(a for a in content(page(out, f"entries/{eid}/")).find_all("div", class_="kb-verified"))
             .attrs["class"].split()[1] for eid in kb.entries}
    assert kinds == {"overfit-one-batch": "success", "lr-too-low": "failure", "double-softmax": "warning",
                     "ddp-no-sync-accumulation": "danger"}


def test_without_a_results_file_every_snippet_says_never_passed(tmp_path):
    kb = load_kb(FIXTURE_KB, use_cache=False)
    pages = site.render_pages(kb, site.load_results(str(tmp_path / "absent.json")))
    for e in kb.entries.values():
        assert '!!! danger kb-verified "Never passed"' in pages[f"entries/{e.id}.md"]


def test_malformed_results_file_is_an_error(tmp_path):
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps({"results": {"x": "passed"}}))
    with pytest.raises(site.SiteError, match="not a verified-runs file"):
        site.load_results(str(bad))


def test_alias_redirects_point_at_the_entry(fixture_site):
    out, kb = fixture_site
    for e in kb.entries.values():
        for alias in e.aliases:
            root = page(out, f"{alias}/")
            refresh = next(m for m in root.find_all("meta") if m.attrs.get("http-equiv") == "refresh")
            target = refresh.attrs["content"].split("url=", 1)[1]
            assert urllib.parse.urljoin(f"/{alias}/", target) == f"/entries/{e.id}/"
            assert os.path.exists(os.path.join(out, "entries", e.id, "index.html"))


def symptom_pages(out) -> dict:
    """Every page of the symptom index that lists symptoms in full: url -> its list items. A sign
    with a page per area (a folder under symptoms/<sign>/) is listed by those pages; its own page
    shows only samples."""
    pages = {}
    root = os.path.join(out, "symptoms")
    for sign in sorted(os.listdir(root)):
        if not os.path.isdir(os.path.join(root, sign)):
            continue
        areas = sorted(a for a in os.listdir(os.path.join(root, sign)) if os.path.isdir(os.path.join(root, sign, a)))
        for url in ([f"symptoms/{sign}/{a}/" for a in areas] or [f"symptoms/{sign}/"]):
            pages[url] = content(page(out, url)).find_all("li")
    return pages


def test_symptom_index_lists_every_symptom_with_its_entry(fixture_site):
    out, kb = fixture_site
    listed = set()
    for url, items in symptom_pages(out).items():
        for li in items:
            link = li.find_all("a")[-1]
            listed.add((rendered(li.text()).rsplit(" → ", 1)[0], urllib.parse.urljoin(f"/{url}", link.attrs["href"])))
    expected = {(rendered(site.short_line(s)), f"/entries/{e.id}/") for e in kb.entries.values() for s in e.symptoms}
    assert listed == expected


def test_folklore_shows_each_quote_once_under_an_area(fixture_site):
    """Each quote once, under the heading of the area of the first entry (areas in site
    order, then id) that cites it; the headings are the area names."""
    out, kb = fixture_site
    body = content(page(out, "folklore/"))
    heading, seen = None, {}
    for node in body.iter():
        if node.tag == "h2":
            heading = norm(node.text()).rstrip("¶").strip()
        elif node.tag == "div" and "kb-quote" in node.attrs.get("class", "").split():
            q = kb.quotes[node.attrs["data-quote"]]
            assert q.id not in seen, f"{q.id} is shown twice"
            seen[q.id] = heading
            assert rendered(q.text) in norm(node.find_all("blockquote")[0].text())
    expected = {}
    for q in kb.quotes.values():
        users = sorted((e for e in kb.entries.values() if q.id in e.quote_ids),
                       key=lambda e: (site.AREAS.index(e.area), e.id))
        expected[q.id] = site.AREA_INFO[users[0].area][0] if users else "Not yet behind an entry"
    assert seen == expected
    assert len(set(expected.values())) >= 2, "the fixture's quotes all fall under one area: the check proves little"


def test_citation_links_land_on_the_cited_line(fixture_site):
    out, kb = fixture_site
    checked = 0
    for e in kb.entries.values():
        body = content(page(out, f"entries/{e.id}/"))
        for block in body.find_all("div", class_="kb-quote"):
            q = kb.quotes[block.attrs["data-quote"]]
            link = block.find_all("a", class_="kb-cite")[0]
            url = urllib.parse.urljoin(f"/entries/{e.id}/", link.attrs["href"])
            path, _, anchor = url.partition("#")
            assert path == f"/sources/{q.source}/"
            source_page = page(out, path.lstrip("/"))
            with open(os.path.join(FIXTURE, kb.sources[q.source].path), encoding="utf-8") as fh:
                lines = fh.read().splitlines()
            if q.lines:
                first, last = q.lines
                assert anchor == (f"L{first}" if first == last else f"L{first}-L{last}")
                if first != last:  # the range's anchor sits right before its first line
                    assert source_page.by_id(anchor) is not None
                    anchor = f"L{first}"
                line = source_page.by_id(anchor)
                assert line is not None and "kb-quoted" in line.attrs["class"].split()
                assert line.find_all("span", class_="kb-text")[0].text() == lines[q.lines[0] - 1]
                checked += 1
            else:  # a package docstring: cited by object, found in the cached copy by its words
                line = source_page.by_id(anchor)
                assert " ".join(q.text.split()[:4]) in lines[int(anchor[1:]) - 1]
                assert "kb-quoted" in line.attrs["class"].split()
                assert q.object in norm(link.text())
    assert checked >= 2


def test_each_cited_quote_shows_its_author_and_why_it_is_cited(fixture_site):
    out, kb = fixture_site
    seen = set()
    for e in kb.entries.values():
        body = content(page(out, f"entries/{e.id}/"))
        blocks = body.find_all("div", class_="kb-quote")
        assert [b.attrs["data-quote"] for b in blocks] == e.quote_ids
        for block, cite in zip(blocks, e.evidence):
            q, text = kb.quotes[cite["quote"]], norm(block.text())
            src = kb.sources[q.source]
            (why,) = block.find_all("p", class_="kb-supports")
            assert norm(why.text()) == "Why it is cited here: " + norm(cite["supports"])
            if src.kind == "secondary":
                assert f"\u2014 {src.author}, retelling {src.retells['author']}'s {src.retells['title']} " \
                       f"secondary source ({src.title})" in text, text
                seen.add("secondary")
            else:
                assert f"\u2014 {src.author}, {src.title}," in text and "retelling" not in text, text
                seen.add("primary")
    assert seen == {"primary", "secondary"}


def test_source_pages_show_kind_provenance_and_hash(fixture_site):
    out, kb = fixture_site
    rows = {}
    for sid in kb.sources:
        table = content(page(out, f"sources/{sid}/")).find_all("table")[0]
        rows[sid] = {norm(r.find_all("td")[0].text()): r.find_all("td")[1] for r in table.find_all("tr")
                     if r.find_all("td")}
    retold = rows["retold-notes"]
    assert norm(retold["Kind"].text()) == ("secondary: Bo Reader's retelling of Ada Example's Field notes on slow "
                                           "training; its quotes are Bo Reader's words")
    assert retold["Kind"].find_all("a")[0].attrs["href"] == "https://example.org/notes/slow-training"
    (link,) = retold["Captured from"].find_all("a")
    assert link.attrs["href"] == ("https://github.com/example-org/reading-notes/blob/"
                                  "89abcdef0123456789abcdef0123456789abcdef/notes/field%20notes.md")
    assert norm(link.text()) == "example-org/reading-notes@89abcdef0123:notes/field notes.md"
    assert kb.sources["retold-notes"].sha256 in norm(retold["sha256"].text())
    assert "Retrieved" not in retold
    notes = rows["field-notes"]
    assert norm(notes["Kind"].text()) == "primary: the author's own published words"
    assert norm(notes["Retrieved"].text()) == "2026-11-20" and "Captured from" not in notes
    assert norm(notes["sha256"].text()) == "not recorded"
    assert norm(rows["torch-docs"]["Captured from"].text()) == "the installed package torch"
    index = content(page(out, "sources/"))
    assert "A secondary source is someone else's retelling" in norm(index.text())
    kinds = {norm(r.find_all("td")[0].text()): norm(r.find_all("td")[2].text())
             for r in index.find_all("tr") if r.find_all("td")}
    assert kinds[kb.sources["retold-notes"].title] == "secondary (retells Ada Example)"
    assert kinds["Field notes on slow training"] == "primary"


def test_source_pages_number_every_line(fixture_site):
    out, kb = fixture_site
    for sid, s in kb.sources.items():
        with open(os.path.join(FIXTURE, s.path), encoding="utf-8") as fh:
            lines = fh.read().splitlines()
        root = page(out, f"sources/{sid}/")
        rows = root.find_all("div", class_="kb-line")
        assert [r.attrs["id"] for r in rows] == [f"L{n}" for n in range(1, len(lines) + 1)]
        assert [r.find_all("span", class_="kb-text")[0].text() for r in rows] == lines
        text = norm(content(root).text())
        assert s.author in text and s.url in text


def test_yaml_text_cannot_inject_markup_or_script(fixture_site):
    """A symptom and a quote carry <script>, an <img onerror>, a javascript: link and markdown."""
    out, kb = fixture_site
    symptom = next(s for s in kb.entries["double-softmax"].symptoms if "<script>" in s)
    quote = kb.quotes["notes-raw-tag"]
    assert "<script>" in quote.text and "**" in quote.text
    pages = ["entries/double-softmax/", "symptoms/", "folklore/", "sources/field-notes/", "areas/loss/"]
    for url in pages:
        root = page(out, url)
        for node in root.iter():
            assert not any(k.startswith("on") for k in node.attrs), (url, node.tag, node.attrs)
            assert not node.attrs.get("href", "").lower().startswith("javascript:"), url
        for script in root.find_all("script"):
            assert "__kbInjected" not in script.text(), url
        body = content(root)
        assert not [n.tag for n in body.iter() if n.tag in ("img", "b", "script", "iframe")], url
        assert not [n for n in body.iter() if n.tag in ("strong", "em") and n.text() in ("bold", "under", "stars")], url
        assert body.by_id("not-a-heading") is None
    title = kb.entries["double-softmax"].title
    assert "</title>" in title
    for url in ["entries/double-softmax/", "areas/loss/", "entries/"]:
        root = page(out, url)  # the nav of the entry pages names the entry by its id, the title is in <title>
        nav_titles = [norm(a.text()) for a in root.find_all("a") if "/entries/double-softmax/" in
                      urllib.parse.urljoin(f"/{url}", a.attrs.get("href", ""))]
        assert "double-softmax" in nav_titles, url
    assert norm(page(out, "entries/double-softmax/").find_all("title")[0].text()).startswith(rendered(title))
    entry_text = norm(content(page(out, "entries/double-softmax/")).text())
    assert rendered(symptom) in entry_text and rendered(quote.text) in entry_text
    assert rendered(site.short_line(symptom)) in norm(content(page(out, f"symptoms/{site.symptom_sign(symptom)}/")).text())
    assert rendered(quote.text) in norm(content(page(out, "folklore/")).text())
    # the search index carries it as data, verbatim; the search box shows it as text (test_browser.py)
    index = json.load(open(os.path.join(out, "search", "kb-index.json"), encoding="utf-8"))
    assert symptom in index["symptoms"][index["ids"].index("double-softmax")]


def test_search_index_holds_every_entry_and_symptom(fixture_site):
    """The site searches the index `kb search` ranks with (search/kb-index.json), not the theme's lunr index."""
    out, kb = fixture_site
    index = json.load(open(os.path.join(out, "search", "kb-index.json"), encoding="utf-8"))
    assert index["ids"] == list(kb.entries)
    for n, e in enumerate(kb.entries.values()):
        assert (index["titles"][n], index["areas"][n], index["symptoms"][n]) == (e.title, e.area, e.symptoms)
    assert index["constants"]["LEXICAL_SHARE"] == search_rank.LEXICAL_SHARE
    assert index["constants"]["DENSE_BASELINE_RANK"] == search_rank.DENSE_BASELINE_RANK
    assert not os.path.exists(os.path.join(out, "search", "search_index.json"))
    for url in ("", "entries/double-softmax/", "sources/field-notes/"):
        root = page(out, url)
        scripts = [urllib.parse.urljoin(f"/{url}", s.attrs["src"]) for s in root.find_all("script") if "src" in s.attrs]
        assert "/search/kb-search.js" in scripts, url
        assert root.find_all("input", **{"data-md-component": "search-query"}) == [], url


def test_navigation_shows_the_areas(fixture_site):
    out, kb = fixture_site
    nav = next(n for n in page(out, "entries/").iter() if attr_has(n, "class", "md-nav--primary"))
    labels = {norm(n.text()) for n in nav.iter() if n.tag in ("label", "a", "span")}
    for area in ("Triage", "Optimizer", "Loss functions", "Distributed"):
        assert area in labels


def test_home_page_links_the_triage_path(fixture_site):
    out, kb = fixture_site
    body = content(page(out, ""))
    hrefs = [urllib.parse.urljoin("/", a.attrs.get("href", "")) for a in body.find_all("a")]
    assert "/entries/overfit-one-batch/" in hrefs
    assert "/symptoms/" in hrefs and "/folklore/" in hrefs and "/sources/" in hrefs


def test_tags_page_lists_each_tag_and_its_entries(fixture_site):
    out, kb = fixture_site
    body = content(page(out, "tags/"))
    for e in kb.entries.values():
        for tag in e.tags:
            head = body.by_id(str(site.slug(tag, "tag-")))
            assert head is not None and head.tag == "h2"
            section = head.parent.children[head.parent.children.index(head):]
            ul = next(n for n in section if isinstance(n, Node) and n.tag == "ul")
            assert f"/entries/{e.id}/" in {urllib.parse.urljoin("/tags/", a.attrs["href"]) for a in ul.find_all("a")}


# ---------------------------------------------------------------- failures and guards

def test_strict_mode_fails_on_a_broken_link(tmp_path):
    templates = tmp_path / "templates"
    shutil.copytree(os.path.join(REPO, "site_templates"), templates)
    broken = templates / "home.md.j2"
    broken.write_text(broken.read_text() + "\n[gone](entries/no-such-entry.md)\n")
    kb = load_kb(FIXTURE_KB, use_cache=False)
    with pytest.raises(site.SiteError, match="strict mode.*no-such-entry"):
        site.build_site(kb, out_dir=str(tmp_path / "site"), work_dir=str(tmp_path / "src"),
                        templates=str(templates))


def test_refuses_to_build_into_a_folder_it_did_not_make(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    kb = load_kb(FIXTURE_KB, use_cache=False)
    with pytest.raises(site.SiteError, match="refusing"):
        site.build_site(kb, out_dir=str(precious), work_dir=str(tmp_path / "src"))
    assert (precious / "thesis.tex").read_text() == "years of work"


def test_alias_that_takes_a_site_path_is_refused_with_its_check_code(tmp_path):
    kb_dir = make_kb(tmp_path, entries=[entry("alpha-bug", aliases=["tags"])])
    with pytest.raises(site.SiteError, match="KB024 aliases"):
        site.render_pages(load_kb(str(kb_dir), use_cache=False))


def test_generated_folder_drops_pages_of_removed_entries(tmp_path):
    kb_dir = make_kb(tmp_path)
    site.generate(load_kb(str(kb_dir), use_cache=False), str(tmp_path / "src"))
    assert (tmp_path / "src" / "docs" / "entries" / "beta-bug.md").exists()
    os.remove(kb_dir / "entries" / "numerics" / "beta-bug.yaml")
    site.generate(load_kb(str(kb_dir), use_cache=False), str(tmp_path / "src"))
    assert not (tmp_path / "src" / "docs" / "entries" / "beta-bug.md").exists()
    assert (tmp_path / "src" / "docs" / "entries" / "alpha-bug.md").exists()


def test_build_command_reports_and_fails_in_one_line(tmp_path, capsys):
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("gamma-bug", see_also=["no-such-entry"]))
    code = cli.main(["--kb", str(kb_dir), "build", "--out", str(tmp_path / "site"), "--work", str(tmp_path / "src")])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1 and "KB010" in err


@pytest.mark.parametrize("option", ["--out", "--work"])
def test_build_into_an_unwritable_place_fails_in_one_line(tmp_path, capsys, option):
    kb_dir = make_kb(tmp_path)
    (tmp_path / "a-file").write_text("not a folder")
    where = {"--out": str(tmp_path / "site"), "--work": str(tmp_path / "src"), option: str(tmp_path / "a-file" / "x")}
    code = cli.main(["--kb", str(kb_dir), "build", "--out", where["--out"], "--work", where["--work"]])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1 and "a-file" in err and "cannot write" in err, err


# ---------------------------------------------------------------- kb serve

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def test_serve_regenerates_pages_when_an_entry_changes(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "kbcopy")
    kb_dir = tmp_path / "kbcopy" / "kb"
    port = _free_port()
    env = {**os.environ, "KB_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "kb_tools", "--kb", str(kb_dir), "serve",
                             "--dev-addr", f"127.0.0.1:{port}", "--work", str(tmp_path / "src")],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/entries/lr-too-low/"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                assert "Learning rate far too small" in _get(url)
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
                assert time.monotonic() < deadline, "kb serve did not start"
                time.sleep(0.5)
        path = kb_dir / "entries" / "optimizer" / "lr-too-low.yaml"
        path.write_text(path.read_text().replace("Learning rate far too small", "Step size far too small"))
        deadline = time.monotonic() + 60

        def followed() -> bool:
            try:  # a request that arrives during the rebuild may wait past its timeout on a loaded machine
                return "Step size far too small" in _get(url)
            except OSError:
                return False
        while not followed():
            assert time.monotonic() < deadline, "the page did not follow the edit"
            time.sleep(0.5)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()


# ---------------------------------------------------------------- the shipped KB

def test_shipped_kb_builds_strict_and_every_item_is_on_the_site(shipped_site):
    report, kb = shipped_site
    out = report.out
    entry_pages = sorted(os.listdir(os.path.join(out, "entries")))
    assert [p for p in entry_pages if p != "index.html"] == sorted(kb.entries)
    source_pages = sorted(os.listdir(os.path.join(out, "sources")))
    assert [p for p in source_pages if p != "index.html"] == sorted(kb.sources)
    folklore = {b.attrs["data-quote"] for b in content(page(out, "folklore/")).find_all("div", class_="kb-quote")}
    assert folklore == set(kb.quotes)
    for e in kb.entries.values():
        body = content(page(out, f"entries/{e.id}/"))
        assert [b.attrs["data-quote"] for b in body.find_all("div", class_="kb-quote")] == e.quote_ids
    for sid, s in kb.sources.items():
        with open(os.path.join(os.path.dirname(kb.root), s.path), encoding="utf-8") as fh:
            n = len(fh.read().splitlines())
        assert len(page(out, f"sources/{sid}/").find_all("div", class_="kb-line")) == n
    symptoms = [li for items in symptom_pages(out).values() for li in items]
    assert len(symptoms) == sum(len(e.symptoms) for e in kb.entries.values())
    sizes = {os.path.relpath(os.path.join(d, f), out): os.path.getsize(os.path.join(d, f))
             for d, _, files in os.walk(os.path.join(out, "symptoms")) for f in files if f.endswith(".html")}
    assert max(sizes.values()) < 50_000, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]  # each fits a phone's first load
    for e in kb.entries.values():
        for alias in e.aliases:
            assert os.path.exists(os.path.join(out, alias, "index.html")), alias
    assert report.pages >= 1 + len(kb.entries) + len(kb.sources)


def test_llms_txt_indexes_every_entry_with_a_markdown_copy_that_exists(shipped_site):
    import re
    report, kb = shipped_site
    with open(os.path.join(report.out, "llms.txt"), encoding="utf-8") as fh:
        text = fh.read()
    assert text.startswith("# ") and "\n> " in text  # the llms.txt form: a title, then a summary line
    links = re.findall(r"^- \[([a-z0-9-]+)\]\((md/[a-z0-9-]+\.md)\): ", text, re.M)
    assert sorted(i for i, _ in links) == sorted(kb.entries)
    for entry_id, link in links:
        with open(os.path.join(report.out, link), encoding="utf-8") as fh:
            md = fh.read()
        entry = kb.entries[entry_id]
        assert md.startswith(f"## {entry_id}: {entry.title}") and entry.snippet.splitlines()[0] in md
        assert "<" + "div" not in md  # plain Markdown, not the site's HTML


# ---------------------------------------------------------------- mentions, the H1, the fix pair

class _Names:
    """A stand-in KB: entries with ids and aliases, enough for site.entry_links."""

    def __init__(self, **aliases):
        class E:
            def __init__(self, eid, names):
                self.id, self.aliases, self.title = eid, names, f"The `{eid}` entry"
        self.entries = {eid: E(eid, names) for eid, names in aliases.items()}


def test_mentions_become_links_to_other_entries_only():
    kb = _Names(**{"lr-too-low": ["O7"], "double-softmax": ["O12"]})
    links = site.entry_links(kb, kb.entries["double-softmax"], "../")
    target = ("../entries/lr-too-low.md", "The lr-too-low entry")
    assert links == {"lr-too-low": target, "O7": target}
    text = str(site.prose("Differs from lr-too-low and `O7`; double-softmax and O12 are this one.", links))
    # one style for every mention (code), the target's title as the link's title
    named = 'title="The lr&#45;too&#45;low entry"'
    assert text == (f"Differs from [<code>lr&#45;too&#45;low</code>](../entries/lr-too-low.md){{ .kb-mention {named} }} and "
                    f"[<code>O7</code>](../entries/lr-too-low.md){{ .kb-mention {named} }}; double&#45;softmax and O12 are "
                    "this one&#46;")
    # not whole words, code that is more than the id, other cases of an alias: plain text
    for plain in ("lr-too-lower", "the lr-too-low.yaml file", "/entries/lr-too-low/", "`lr-too-low(x)`", "o7"):
        assert "kb-mention" not in str(site.prose(plain, links)), plain


def test_mention_links_keep_the_escaping_guarantee():
    kb = _Names(**{"lr-too-low": [], "here": []})
    links = site.entry_links(kb, kb.entries["here"], "../")
    text = str(site.inline("<b>lr-too-low</b>](javascript:x) [lr-too-low](x) *lr-too-low*", links))
    outside = re.sub(r"\[<code>lr&#45;too&#45;low</code>\]\(\.\./entries/lr-too-low\.md\)"
                     r"\{ \.kb-mention title=\"The lr&#45;too&#45;low entry\" \}", "", text)
    assert text.count("kb-mention") == 3
    assert not re.search(r"[<>\[\]()*`_{}]", outside), outside  # every other control character is an entity


def test_fixture_entry_links_its_look_alike_and_shows_the_fix_pair(fixture_site):
    out, kb = fixture_site
    body = content(page(out, "entries/overfit-one-batch/"))
    (link,) = body.find_all("a", class_="kb-mention")
    assert link.attrs["href"] == "../lr-too-low/" and norm(link.text()) == "lr-too-low"
    assert link.attrs["title"] == rendered(kb.entries["lr-too-low"].title)  # a bare id says where it leads
    assert link.find_all("code")  # every mention in one style
    body = content(page(out, "entries/double-softmax/"))
    pair = body.find_all("div", class_="kb-fix-pair")
    assert len(pair) == 1
    e = kb.entries["double-softmax"]
    for side in ("before", "after"):
        (block,) = pair[0].find_all("div", class_=f"kb-{side}")
        assert norm(block.text()).startswith(side.capitalize())
        assert norm(block.find_all("code")[0].text()) == norm(e.fix_pair[side])
    html = open(os.path.join(out, "entries", "double-softmax", "index.html"), encoding="utf-8").read()
    assert html.index("kb-fix-pair") < html.index('id="snippet"')
    assert "kb-fix-pair" not in open(os.path.join(out, "entries", "lr-too-low", "index.html"), encoding="utf-8").read()


def test_shipped_pages_link_every_mention_of_another_entry(shipped_site):
    from kb_tools.core.util import PROSE_FIELDS, prose_words
    report, kb = shipped_site
    names = {n: e.id for e in kb.entries.values() for n in (e.id, *e.aliases)}
    total = 0
    for e in kb.entries.values():
        want = {names[w] for f in PROSE_FIELDS for w, in_code, whole, _ in prose_words(getattr(e, f) or "")
                if w in names and names[w] != e.id and (whole or not in_code)}
        body = content(page(report.out, f"entries/{e.id}/"))
        got = {a.attrs["href"].strip("./").removesuffix("/") for a in body.find_all("a", class_="kb-mention")}
        assert got == want, e.id
        total += len(want)
    assert total >= 200  # the look-alike comparisons of the shipped KB


def test_shipped_entries_open_fix_with_their_pair(shipped_site):
    report, kb = shipped_site
    paired = [e for e in kb.entries.values() if e.fix_pair]
    assert len(paired) >= 90  # the goal is every entry; a few have no two-sided change in their snippet
    for e in kb.entries.values():
        html = open(os.path.join(report.out, "entries", e.id, "index.html"), encoding="utf-8").read()
        top = html[html.index("<h1"):html.index('id="symptoms"')]  # the page's first screen, before Symptoms
        assert ('class="kb-fix-pair' in top) == bool(e.fix_pair), e.id
        assert html.count('class="kb-fix-pair') == bool(e.fix_pair), e.id  # shown once, not again under Fix
        if e.fix_pair:
            assert re.search(r'class="kb-badge[^"]*".*?</p>\s*<div class="kb-fix-pair', top, re.S), e.id
# ---------------------------------------------------------------- deployment: site_url, sitemap, canonical, 404, edit links

SITE_URL, REPO_URL = "https://example.org/debug/kb/", "https://example.org/team/pytorch-kb"


@pytest.fixture(scope="module")
def deployed_site(tmp_path_factory):
    """The fixture KB built as it would be deployed under a sub-path, with edit links."""
    tmp = tmp_path_factory.mktemp("deployed-site")
    out = tmp / "site"
    code = cli.main(["--kb", FIXTURE_KB, "build", "--out", str(out), "--work", str(tmp / "src"),
                     "--results", str(tmp / "none.json"), "--site-url", SITE_URL.rstrip("/"),
                     "--repo-url", REPO_URL, "--edit-uri", "edit/trunk/"])
    assert code == 0
    return str(out), load_kb(FIXTURE_KB, use_cache=False)


def _html_pages(out):
    for dirpath, _, files in os.walk(out):
        for f in files:
            if f.endswith(".html"):
                yield os.path.relpath(os.path.join(dirpath, f), out).replace(os.sep, "/")


def test_sitemap_lists_every_entry_at_its_absolute_address(deployed_site):
    out, kb = deployed_site
    with open(os.path.join(out, "sitemap.xml"), encoding="utf-8") as fh:
        locs = re.findall(r"<loc>([^<]*)</loc>", fh.read())
    assert locs and all(loc.startswith(SITE_URL) for loc in locs), locs[:3]
    assert {f"{SITE_URL}entries/{e.id}/" for e in kb.entries.values()} <= set(locs)


def test_every_page_names_its_canonical_address(deployed_site):
    out, kb = deployed_site
    aliases = {a for e in kb.entries.values() for a in e.aliases} | {a.lower() for e in kb.entries.values() for a in e.aliases}
    pages = [p for p in _html_pages(out) if p != "404.html"]
    assert len(pages) > len(kb.entries)
    for rel in pages:
        canon = page(out, rel).find_all("link", rel="canonical")
        assert len(canon) == 1, rel
        href = canon[0].attrs["href"]
        folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
        if folder in aliases:  # an alias's redirect page names the entry's address
            assert href.startswith(f"{SITE_URL}entries/"), (rel, href)
        else:
            assert href == SITE_URL + (folder + "/" if folder else ""), (rel, href)


def test_entry_pages_link_their_yaml_file_for_editing(deployed_site, fixture_site):
    out, kb = deployed_site
    for e in kb.entries.values():
        links = content(page(out, f"entries/{e.id}/")).find_all("p", class_="kb-edit")
        assert len(links) == 1
        assert links[0].find_all("a")[0].attrs["href"] == f"{REPO_URL}/edit/trunk/{e.path}"
        assert os.path.isfile(os.path.join(FIXTURE, e.path))
    plain, _ = fixture_site  # built without a repository address: no edit link
    assert all(not content(page(plain, f"entries/{e.id}/")).find_all("p", class_="kb-edit") for e in kb.entries.values())


def test_404_page_loads_from_the_sub_path_and_has_the_name_table(deployed_site):
    out, kb = deployed_site
    root = page(out, "404.html")
    sub = urllib.parse.urlsplit(SITE_URL).path
    assets = [n.attrs["href"] for n in root.find_all("link", rel="stylesheet")] + \
        [n.attrs["src"] for n in root.find_all("script") if n.attrs.get("src")]
    assert assets and all(a.startswith(sub) for a in assets), assets
    assert any(a.endswith("javascripts/kb-site.js") for a in assets)
    assert root.by_id("kb-did-you-mean") is not None
    with open(os.path.join(out, "javascripts", "kb-names.json"), encoding="utf-8") as fh:
        table = json.load(fh)
    expected = {e.id: e.id for e in kb.entries.values()}
    expected.update({a: e.id for e in kb.entries.values() for a in e.aliases})
    assert table["names"] == expected
    assert set(table["titles"]) == set(kb.entries)


def test_a_build_without_addresses_says_what_it_leaves_out(fixture_site, capsys):
    """No site URL: no sitemap at all (not an empty one), and one line naming the options; the 404
    page loads its assets relative to the root it finds at run time (tests/test_browser.py serves it
    under a sub-path)."""
    out, _ = fixture_site
    assert not os.path.exists(os.path.join(out, "sitemap.xml")) and not os.path.exists(os.path.join(out, "sitemap.xml.gz"))
    notes = site.deploy_notes(site.deploy_settings(None, None))
    assert len(notes) == 1 and "--site-url" in notes[0] and "--repo-url" in notes[0] and "sitemap" in notes[0]
    assert site.deploy_notes(site.deploy_settings(SITE_URL, REPO_URL)) == []
    assert "--site-url" not in site.deploy_notes(site.deploy_settings(SITE_URL, None))[0]
    root = page(out, "404.html")
    assets = [n.attrs["href"] for n in root.find_all("link", rel="stylesheet")] + \
        [n.attrs["src"] for n in root.find_all("script") if n.attrs.get("src")]
    assert assets and not [a for a in assets if a.startswith("/")], assets
    probe = root.find_all("script")[0].text()
    assert "document.write('<base href" in probe and site.NAMES_FILE in probe


def test_each_entry_page_has_its_own_meta_description(fixture_site):
    out, kb = fixture_site
    seen = set()
    for e in kb.entries.values():
        (meta,) = [m for m in page(out, f"entries/{e.id}/").find_all("meta") if m.attrs.get("name") == "description"]
        text = meta.attrs["content"]
        assert text.startswith(rendered(e.title)) and rendered(e.symptoms[0])[:40] in text, e.id
        seen.add(text)
    assert len(seen) == len(kb.entries)


def test_markdown_copy_carries_the_evidence_and_the_verification(fixture_site):
    out, kb = fixture_site
    for e in kb.entries.values():
        with open(os.path.join(out, "md", f"{e.id}.md"), encoding="utf-8") as fh:
            md = fh.read()
        assert re.search(r"^Verified: (Passed|Failed|Changed|Never)", md, re.M), e.id
        for qid in e.quote_ids:
            q = kb.quotes[qid]
            assert f"quote `{qid}`" in md and f"source `{q.source}`" in md
            assert " ".join(q.text.split())[:60] in " ".join(re.sub(r"^> ?", "", md, flags=re.M).split())
            if q.lines:
                assert f"lines {q.lines[0]}-{q.lines[1]}" in md
    passed = open(os.path.join(out, "md", "overfit-one-batch.md"), encoding="utf-8").read()
    assert f"Verified: Passed on cpu, {GPU} with torch 2.13.0+cpu on 2026-11-20." in passed


@pytest.mark.parametrize("option, value", [("--site-url", "example.org/kb"), ("--repo-url", "ftp://x/y"),
                                           ("--edit-uri", "../../etc")])
def test_bad_deployment_option_fails_in_one_line(tmp_path, capsys, option, value):
    code = cli.main(["--kb", FIXTURE_KB, "build", "--out", str(tmp_path / "site"), "--work", str(tmp_path / "src"),
                     option, value])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1 and option in err and value in err, err
    assert "Traceback" not in err and not (tmp_path / "site").exists()
# ---------------------------------------------------------------- indexes: symptoms by sign, entries table, tags

@pytest.mark.parametrize("text, sign", [
    ("RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn", "error"),
    ("loss becomes nan after a few hundred steps, validation too", "nan"),
    ("training blows up after raising the batch size", "diverges"),
    ("validation accuracy stays at chance while train loss goes down", "chance"),
    ("validation loss rises while training loss keeps falling", "validation"),
    ("CUDA out of memory inside optimizer.step()", "resources"),
    ("loss is flat from the first step", "flat"),
    ("parameters identical before and after optimizer.step()", "flat"),
    ("training plateaus although the learning rate is constant", "flat"),  # a constant lr is not a constant prediction
    ("regression model predicts a constant for every input", "chance"),
    ("fine-tuned chat model rambles and never stops at inference", "validation"),
    ("tensorboard add_histogram for weights, how to read it", "other"),
])
def test_each_symptom_gets_the_sign_it_shows(text, sign):
    assert site.symptom_sign(text) == sign


def test_short_line_cuts_long_symptoms_at_a_word():
    long = "the loss " + "goes down slowly and then " * 20 + "stops"
    short = site.short_line(long)
    assert len(short) <= site.SHORT_LINE and short.endswith("…")
    assert long.startswith(short[:-1]) and long[len(short) - 1] == " "  # a whole word, then the cut
    assert site.short_line("  loss  flat ") == "loss flat"


def test_symptom_index_groups_by_sign_then_area_and_links_each_symptom(fixture_site):
    """/symptoms/ leads with the signs people arrive with (ARRIVAL_ORDER: a flat loss first), each
    opening its own page; there each area is a heading and each symptom a link to its entry."""
    out, kb = fixture_site
    body = content(page(out, "symptoms/"))
    headings = {h.attrs["id"]: norm(h.text()).rstrip("¶").strip() for h in body.find_all("h2")}
    used = {site.symptom_sign(s) for e in kb.entries.values() for s in e.symptoms}
    assert [k[len("sign-"):] for k in headings] == [k for k in site.ARRIVAL_ORDER if k in used]  # fixed order, none empty
    assert site.ARRIVAL_ORDER[:4] == ("flat", "nan", "chance", "validation")
    for key in used:  # each heading opens its sign's page
        link = body.by_id(f"sign-{key}").find_all("a")[0]
        assert urllib.parse.urljoin("/symptoms/", link.attrs["href"]) == f"/symptoms/{key}/"
    for e in kb.entries.values():
        for n, s in enumerate(e.symptoms, 1):
            sign = site.symptom_sign(s)
            split = os.path.isdir(os.path.join(out, "symptoms", sign, e.area))
            url = f"symptoms/{sign}/{e.area}/" if split else f"symptoms/{sign}/"
            group = content(page(out, url))
            if split:
                ul = group.find_all("ul")[0]
            else:
                h2 = group.by_id(f"sign-{sign}-{e.area}")
                assert h2 is not None and h2.tag == "h2", (e.id, n)
                section = h2.parent.children[h2.parent.children.index(h2):]
                ul = next(c for c in section if isinstance(c, Node) and c.tag == "ul")
            links = {urllib.parse.urljoin(f"/{url}", a.attrs["href"]): norm(a.text()) for a in ul.find_all("a")}
            assert links[f"/entries/{e.id}/#symptom-{n}"] == rendered(site.short_line(s))
            assert page(out, f"entries/{e.id}/").by_id(f"symptom-{n}") is not None


def test_entries_table_follows_the_triage_path_then_the_areas(fixture_site):
    from kb_tools.core import model
    out, kb = fixture_site
    rows = content(page(out, "entries/")).find_all("table")[0].find_all("tr")[1:]
    ids = [urllib.parse.urljoin("/entries/", r.find_all("a")[0].attrs["href"]) for r in rows]
    triage = [i for i in model.TRIAGE_PATH if i in kb.entries]
    rest = sorted((e for e in kb.entries.values() if e.id not in triage),
                  key=lambda e: (model.AREAS.index(e.area), e.id))
    assert ids == [f"/entries/{i}/" for i in triage + [e.id for e in rest]]
    for row, e in zip(rows, [kb.entries[i] for i in triage] + rest):
        cells = [norm(c.text()) for c in row.find_all("td")]
        assert cells == [" ".join([e.id, *e.aliases]), rendered(e.title), site.AREA_INFO[e.area][0],
                         rendered(site.short_line(e.symptoms[0]))]


def test_nav_lists_entries_by_id_with_triage_in_checklist_order():
    from kb_tools.core import model
    kb = load_kb(os.path.join(REPO, "kb"), use_cache=False)
    entries = next(item["Entries"] for item in site.nav(kb) if "Entries" in item)
    triage = next(section["Triage"] for section in entries if isinstance(section, dict) and "Triage" in section)
    assert triage[0] == "areas/triage/index.md"
    assert [list(item)[0] for item in triage[1:]][:len(model.TRIAGE_PATH)] == list(model.TRIAGE_PATH)
    assert all(item == {i: f"entries/{i}.md"} for item in triage[1:] for i in item)


def test_tags_page_shows_each_vocabulary_tag_with_its_meaning(fixture_site):
    out, kb = fixture_site
    body = content(page(out, "tags/"))
    used = {t for e in kb.entries.values() for t in e.tags}
    shown = {norm(h.text()).rstrip("¶").strip() for h in body.find_all("h2")}
    assert shown == used and used <= set(kb.vocabulary)
    for tag in used:
        head = body.by_id(str(site.slug(tag, "tag-")))
        meaning = next(n for n in head.parent.children[head.parent.children.index(head):]
                       if isinstance(n, Node) and n.tag == "p")
        assert norm(meaning.text()) == kb.vocabulary[tag]


def test_most_shipped_symptoms_fall_under_a_named_sign():
    """The symptom index is useful only while its rules recognise most symptoms: a new kind of
    symptom that lands under "other" in numbers calls for a rule (SYMPTOM_SIGNS), not a bigger pile."""
    kb = load_kb(os.path.join(REPO, "kb"), use_cache=False)
    signs = [site.symptom_sign(s) for e in kb.entries.values() for s in e.symptoms]
    assert signs.count("other") < 0.4 * len(signs)
    assert all(signs.count(key) for key, _, _ in site.SYMPTOM_SIGNS)  # every heading has symptoms


def test_search_payload_of_the_shipped_kb_stays_under_the_limit():
    """A first search fetches the index, the script and the token table: together at most 2 MB (a phone on 4G)."""
    from kb_tools.site import search_export
    kb = load_kb(os.path.join(REPO, "kb"), use_cache=False)
    files = search_export.files(kb, os.path.join(REPO, "site_templates"))
    assert f"search/{search_export.embed.ROWS_FILE}" in files  # the dense side ships: the limit is not met by dropping it
    total = sum(len(v if isinstance(v, bytes) else v.encode("utf-8")) for v in files.values())
    assert total <= 2_000_000, f"{total:,} bytes"
