"""One description of an entry's sections (kb_tools/render/sections.py) feeds every reader: a part
added there shows in `kb show`, the MCP `show` tool, the Markdown copy and the site's page."""
from __future__ import annotations

import asyncio
import json

import pytest

from kb_tools import cli
from kb_tools.core.load import load_kb
from kb_tools.render import sections
from kb_tools.render.markdown import entry_markdown
from kb_tools.render.text import entry_text
from kbfactory import make_kb

MARK = "zebracrossing{}"  # no hyphen: the site writes one as an entity


@pytest.fixture
def kb_with_a_new_part(tmp_path, monkeypatch):
    """A KB, and SECTIONS with one more part under How to check (what adding a field looks like)."""
    kb_dir = make_kb(tmp_path)
    part = sections.Part("new_field", "prose", read=lambda e: MARK.format(e.id.replace("-", "")))
    grown = tuple(sections.Section(s.key, s.heading, s.parts + (part,), s.empty) if s.key == "check" else s
                  for s in sections.SECTIONS)
    monkeypatch.setattr(sections, "SECTIONS", grown)
    return load_kb(str(kb_dir), use_cache=False)


def test_a_part_added_once_shows_in_all_four_renderings(kb_with_a_new_part, capsys):
    kb = kb_with_a_new_part
    e = next(iter(kb.entries.values()))
    mark = MARK.format(e.id.replace("-", ""))
    # 1. kb show: under its section's heading
    assert cli.main(["--kb", kb.root, "show", e.id]) == 0
    shown = capsys.readouterr().out
    assert shown.index("How to check") < shown.index(mark) < shown.index("Snippet")
    # 2. the MCP show tool (and kb show --json)
    pytest.importorskip("mcp")
    from kb_tools.mcp_server import build_server
    result = asyncio.run(build_server(kb.root).call_tool("show", {"id": e.id}))
    assert result.structured_content["new_field"] == mark
    assert cli.main(["--kb", kb.root, "show", e.id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["new_field"] == mark
    # 3. the Markdown copy agents read (the site's md/ID.md is this text)
    md = entry_markdown(e)
    assert md.index("### How to check") < md.index(mark) < md.index("### Snippet")
    # 4. the site's entry page
    from kb_tools.site.build import render_pages
    page = render_pages(kb)[f"entries/{e.id}.md"]
    assert page.index("## How to check") < page.index(mark) < page.index("## Snippet")


def test_an_empty_part_is_left_out_and_an_empty_section_says_so(kb_with_a_new_part):
    e = next(iter(kb_with_a_new_part.entries.values()))
    e.see_also, e.correction = [], None
    text, md = entry_text(e), entry_markdown(e)
    assert "Correction to common advice" not in text and "Correction to common advice" not in md
    assert "See also\nNothing listed." in text and "### See also\n\nNothing listed." in md


def test_every_part_kind_has_a_form_in_each_renderer(kb_with_a_new_part):
    from kb_tools.render.markdown import part_markdown
    from kb_tools.render.text import part_text
    e = next(iter(kb_with_a_new_part.entries.values()))
    samples = {"list": ["a"], "prose": "b", "warning": "c", "code_pair": {"before": "x", "after": "y"},
               "rules": [{"code": "KBL001", "name": "n"}], "figures": {"f": "1-2"}, "snippet": "print(1)",
               "evidence": [{"quote": "q", "supports": "s"}], "entries": ["z"]}
    assert set(samples) == set(sections.KINDS)
    for kind, value in samples.items():
        part = sections.Part("k", kind, label="L")
        assert part_text(e, part, value) and part_markdown(e, part, value)



def test_an_evidence_note_shows_under_evidence_in_all_four_renderings(tmp_path, capsys):
    """An entry without quotes says why, in place of the bare "No quotes back this entry yet."."""
    from kbfactory import entry, write_entry
    note = "Searched the torch docs and source and the issue tracker for quotezebra; none states it."
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("beta-bug", area="numerics", evidence_note=note))
    kb = load_kb(str(kb_dir), use_cache=False)
    empty = "No quotes back this entry yet."
    # 1. kb show: the note under Evidence, labelled, and not the empty text
    assert cli.main(["--kb", kb.root, "show", "beta-bug"]) == 0
    shown = capsys.readouterr().out
    assert shown.index("Evidence") < shown.index(f"No primary source found: {note}") < shown.index("Caveats")
    assert empty not in shown
    assert cli.main(["--kb", kb.root, "show", "alpha-bug"]) == 0  # it cites a quote: no note, no label
    assert "No primary source found" not in capsys.readouterr().out
    # 2. kb show --json and the MCP show tool
    assert cli.main(["--kb", kb.root, "show", "beta-bug", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["evidence_note"] == note
    # 3. the Markdown copy
    md = entry_markdown(kb.entries["beta-bug"])
    assert md.index("### Evidence") < md.index(f"**No primary source found:** {note}") < md.index("### Caveats")
    assert empty not in md
    # 4. the site's entry page
    from kb_tools.site.build import render_pages
    pages = render_pages(kb)
    page = pages["entries/beta-bug.md"]
    evidence = page[page.index("## Evidence"):page.index("## Snippet")]  # the page puts the snippet last
    assert '!!! warning "No primary source found"' in evidence and "quotezebra" in evidence
    assert empty not in evidence
    assert "No primary source found" not in pages["entries/alpha-bug.md"]
    pytest.importorskip("mcp")
    from kb_tools.mcp_server import build_server
    result = asyncio.run(build_server(kb.root).call_tool("show", {"id": "beta-bug"}))
    assert result.structured_content["evidence_note"] == note
