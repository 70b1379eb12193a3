"""What agents read: `kb context`, the shared JSON shapes, SKILL.md (llms.txt is in test_site.py)."""
from __future__ import annotations

import json
import os

import pytest

from kb_tools.render import sections as render_sections
from kb_tools.render import markdown as render_markdown
from kb_tools import cli
from kb_tools.render import agents
from kb_tools.core.load import load_kb
from kb_tools.search.index import load_index
from kb_tools.search.rank import search

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KB_DIR = os.path.join(ROOT, "kb")


@pytest.fixture(scope="module")
def kb():
    return load_kb(KB_DIR)


def run(capsys, *argv):
    code = cli.main(["--kb", KB_DIR, *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("query", ["loss flat", "val loss goes up while train loss goes down",
                                   "RuntimeError: element 0 of tensors does not require grad"])
def test_context_fits_its_budget_and_starts_with_the_top_search_hit(capsys, query):
    code, out, _ = run(capsys, "context", query, "--json")
    assert code == 0
    result = json.loads(out)
    first = search(load_index(KB_DIR), query, limit=1)[0].id
    assert result["tokens"] <= 1500 and agents.estimate_tokens(result["markdown"]) == result["tokens"]
    assert result["entries"][0]["id"] == first
    assert result["markdown"].split("\n## ", 1)[1].startswith(f"{first}: ")
    ids = [e["id"] for e in result["entries"]]
    assert ids == [h.id for h in search(load_index(KB_DIR), query, limit=5) if h.id in ids]  # search order


def test_a_tight_budget_still_answers_with_the_first_entry_cut_short(capsys):
    code, out, _ = run(capsys, "context", "loss flat", "--budget", "120")
    assert code == 0 and agents.estimate_tokens(out) <= 120 and out.rstrip().endswith("[...]")
    assert "\n## " in out


@pytest.mark.parametrize("argv, message", [
    (["context", "loss", "--budget", "10"], "--budget must be at least 100"),
    (["context", "   "], "empty query"),
    (["context", "loss", "--limit", "0"], "--limit must be at least 1"),
])
def test_context_refuses_bad_input_in_one_line(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert message in err and err.count("\n") == 1 and out == ""


def test_show_json_is_the_shared_shape(capsys, kb):
    code, out, _ = run(capsys, "show", "O12", "--json")
    assert code == 0 and json.loads(out) == render_sections.entry_json(kb.entries["double-softmax"])


def test_verify_text_accepts_a_real_quote_and_names_a_changed_word(kb):
    quote = kb.quotes[kb.entries["double-softmax"].quote_ids[0]]
    good = agents.verify_text(kb, quote.text, quote.source, object_path=quote.object) if quote.object else \
        agents.verify_text(kb, quote.text, quote.source, lines=quote.lines)
    assert good["ok"] and good["defect"] is None
    words = quote.text.split()
    words[3] = "zebra"
    bad = agents.verify_text(kb, " ".join(words), quote.source, object_path=quote.object)
    assert not bad["ok"] and bad["defect"]["kind"] in ("words-changed", "not-found") and bad["defect"]["code"]


def test_export_skill_writes_a_skill_generated_from_the_kb(tmp_path, capsys, kb):
    code, out, _ = run(capsys, "export-skill", str(tmp_path / "skill"))
    assert code == 0 and "SKILL.md" in out
    text = (tmp_path / "skill" / "SKILL.md").read_text(encoding="utf-8")
    head, body = text.split("\n---\n", 1)
    assert head.startswith("---\nname: ") and "\ndescription: " in head
    assert "kb search" in body and "kb context" in body
    assert all(f"`{e}`" in body for e in kb.entries)  # every entry, so it cannot drift from the KB
    triage = body.split("## First hour", 1)[1].split("## Areas", 1)[0]
    assert triage.index("`overfit-one-batch`") < triage.index("`init-loss-check`")


def test_export_skill_into_an_unwritable_place_is_one_line(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    code, _, err = run(capsys, "export-skill", str(target / "sub"))
    assert code == 1 and "cannot write there" in err and err.count("\n") == 1


def test_entry_markdown_shows_the_fix_pair_after_the_fix(kb):
    paired = [e for e in kb.entries.values() if e.fix_pair]
    assert paired
    for e in paired:
        md = render_markdown.entry_markdown(e)
        fix, check = md.index("\n\n### Fix\n"), md.index("\n\n### How to check\n")
        before = md.index(f"Before:\n```python\n{e.fix_pair['before']}\n```")
        after = md.index(f"After:\n```python\n{e.fix_pair['after']}\n```")
        assert fix < before < after < check, e.id
    plain = next(e for e in kb.entries.values() if not e.fix_pair)
    assert "Before:\n```python" not in render_markdown.entry_markdown(plain)
