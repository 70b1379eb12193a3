"""The loader: every problem code is reported with file, line and field; clean KBs load whole."""
from __future__ import annotations

import os
import re

import pytest
import yaml

from kb_tools.core.load import load_kb
from kb_tools.core.model import CHECK_CODES as CODES
from kbfactory import cite, entry, make_kb, write_entry, write_quotes, write_source, write_vocabulary

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def problems(kb_dir):
    kb = load_kb(str(kb_dir), use_cache=False)
    return kb, [str(p) for p in kb.problems]


def codes(kb_dir):
    return [p.code for p in load_kb(str(kb_dir), use_cache=False).problems]


def test_clean_kb_loads_everything(tmp_path):
    kb, found = problems(make_kb(tmp_path))
    assert found == []
    assert list(kb.entries) == ["alpha-bug", "beta-bug"]
    assert kb.resolve("a1").id == "alpha-bug"
    assert kb.quotes["q-one"].lines == [10, 10]
    assert kb.sources["src"].body_line == 10


def test_snippet_line_points_into_the_yaml(tmp_path):
    kb_dir = make_kb(tmp_path)
    e = load_kb(str(kb_dir), use_cache=False).entries["alpha-bug"]
    file_lines = (tmp_path / e.path).read_text().splitlines()
    assert file_lines[e.snippet_line - 1].strip() == e.snippet.splitlines()[0]


def test_problem_format_is_path_line_code_field(tmp_path):
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("gamma-bug", see_also=["alpha-bgu"]))
    _, found = problems(kb_dir)
    assert len(found) == 1
    assert re.match(r"^kb/entries/loss/gamma-bug\.yaml:\d+: KB010 see_also: unknown entry 'alpha-bgu' "
                    r"\(did you mean 'alpha-bug'\?\)$", found[0]), found[0]


@pytest.mark.parametrize("code, build", [
    ("KB001", lambda t: write_entry(t, {"id": "bad-yaml"}, raw="id: [unclosed\n")),
    ("KB002", lambda t: write_entry(t, {"id": "a-list"}, raw="- just\n- a list\n")),
    ("KB003", lambda t: write_entry(t, {k: v for k, v in entry("no-fix").items() if k != "fix"})),
    ("KB003", lambda t: write_entry(t, {k: v for k, v in entry("no-aliases").items() if k != "aliases"})),
    ("KB004", lambda t: write_entry(t, entry("typed-wrong", tags="not-a-list"))),
    ("KB005", lambda t: write_entry(t, {**entry("extra-field"), "symptomz": ["x"]})),
    ("KB006", lambda t: write_entry(t, entry("stem-name"), raw=yaml.safe_dump(entry("other-name")))),
    ("KB007", lambda t: write_quotes(t, "dupe", [{"id": "q-one", "source": "src", "lines": [10, 10],
                                                   "text": "line one", "themes": ["x"]}])),
    ("KB008", lambda t: write_entry(t, entry("bad-kind", snippet_kind="maybe"))),
    ("KB009", lambda t: write_entry(t, entry("wrong-folder", area="data"), area="loss")),
    ("KB010", lambda t: write_entry(t, entry("bad-ref", see_also=["nope"]))),
    ("KB011", lambda t: write_entry(t, entry("bad-quote", evidence=[cite("q-two")]))),
    ("KB012", lambda t: write_entry(t, entry("alias-clash", aliases=["a1"]))),
    ("KB013", lambda t: write_entry(t, entry("few-symptoms", symptoms=["only one"]))),
    ("KB014", lambda t: write_quotes(t, "orphan", [{"id": "q-orphan", "source": "srcc", "lines": [10, 10],
                                                     "text": "line one", "themes": ["x"]}])),
    ("KB015", lambda t: write_quotes(t, "badlines", [{"id": "q-bad", "source": "src", "lines": [5, 2],
                                                       "text": "line one", "themes": ["x"]}])),
    ("KB016", lambda t: (t / "evidence" / "bare.md").write_text("no front matter here\n")),
    ("KB017", lambda t: write_entry(t, entry("Not_Kebab"))),
    ("KB018", lambda t: write_entry(t, entry("diag-no-note", snippet_kind="diagnostic"))),
    ("KB019", lambda t: (t / "kb" / "synonyms.yaml").write_text("groups:\n  - [lonely]\n")),
    ("KB020", lambda t: write_source(t, "retold", kind="secondary")),
    ("KB021", lambda t: write_source(t, "half-git", repo="owner/name", commit="a" * 40)),
    ("KB022", lambda t: write_source(t, "short-hash", sha256="abc123")),
    ("KB023", lambda t: write_entry(t, entry("bare-id", evidence=["q-one"]))),
    ("KB024", lambda t: write_entry(t, entry("index"))),
    ("KB024", lambda t: write_entry(t, entry("alias-page", aliases=["Tags"]))),
    ("KB024", lambda t: write_entry(t, entry("alias-space", aliases=["O 12"]))),
    ("KB024", lambda t: write_source(t, "index")),
    ("KB017", lambda t: write_source(t, "Not_Kebab")),
    ("KB026", lambda t: write_entry(t, entry("odd-tag", tags=["demo", "dmeo"]))),
    ("KB027", lambda t: write_entry(t, entry("bidi-title", title="Loss \u202enan si"))),
    ("KB028", lambda t: write_entry(t, entry("note-and-quotes", evidence=[cite("q-one")],
                                            evidence_note="Searched the torch docs; nothing says it."))),
])
def test_each_problem_code(tmp_path, code, build):
    kb_dir = make_kb(tmp_path)
    build(tmp_path)
    found = codes(kb_dir)
    assert set(found) == {code}, found  # this code, and only this one


@pytest.mark.parametrize("build", [
    lambda t: write_entry(t, entry("int-key"), raw=yaml.safe_dump({**entry("int-key"), 1: "x"})),
    lambda t: (t / "kb" / "quotes" / "more.yaml").write_text("quotes:\n  - id: q-two\n    true: x\n"),
    lambda t: (t / "evidence" / "numbered.md").write_text("---\n1: x\n---\nbody\n"),
])
def test_a_field_name_that_is_not_text_is_reported_not_crashed(tmp_path, build):
    kb_dir = make_kb(tmp_path)
    build(tmp_path)
    assert "KB005" in codes(kb_dir)


GIT = {"repo": "owner/notes", "commit": "0123456789abcdef0123456789abcdef01234567", "path": "docs/notes.md"}
RETOLD = {"title": "The original", "author": "First Author", "url": "https://example.org/original"}


@pytest.mark.parametrize("meta, expected", [
    ({}, []),                                                      # a web page: url + retrieved
    ({**GIT, "sha256": "0" * 64}, []),                             # a git capture, hash recorded
    ({"package": "torch", "version": "2.13.0", "retrieved": None}, []),   # package docstrings
    ({"kind": "secondary", "retells": RETOLD}, []),
    ({"kind": None}, [("KB003", "kind")]),
    ({"kind": "tertiary"}, [("KB008", "kind")]),
    ({"kind": "secondary"}, [("KB020", "retells")]),
    ({"retells": RETOLD}, [("KB020", "retells")]),                 # a primary source retells nothing
    ({"kind": "secondary", "retells": {"title": "T", "url": "u"}}, [("KB020", "retells")]),
    ({"kind": "secondary", "retells": "T by A"}, [("KB004", "retells")]),
    ({"repo": "owner/notes"}, [("KB021", "commit")]),
    ({"commit": GIT["commit"], "path": "x.md"}, [("KB021", "repo")]),
    ({"retrieved": None}, [("KB021", "retrieved")]),               # a web page needs its date
    ({**GIT, "repo": "notes"}, [("KB022", "repo")]),
    ({**GIT, "commit": "0123456"}, [("KB022", "commit")]),
    ({**GIT, "commit": GIT["commit"].upper()}, [("KB022", "commit")]),
    ({"sha256": "g" * 64}, [("KB022", "sha256")]),
])
def test_source_kind_and_provenance(tmp_path, meta, expected):
    kb_dir = make_kb(tmp_path)
    dropped = [k for k, v in meta.items() if v is None]
    path = write_source(tmp_path, "cap", **{k: v for k, v in meta.items() if v is not None})
    if dropped:
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(line for line in lines if line.split(":")[0] not in dropped))
    kb = load_kb(str(kb_dir), use_cache=False)
    found = [(p.code, p.field) for p in kb.problems]
    assert found == expected, [str(p) for p in kb.problems]
    assert all(p.path == "evidence/cap.md" for p in kb.problems)
    if not expected:
        s = kb.sources["cap"]
        assert (s.repo, s.commit, s.repo_path) == ((GIT["repo"], GIT["commit"], GIT["path"]) if "repo" in meta
                                                   else (None, None, None))
        assert s.retells == (RETOLD if s.kind == "secondary" else None)


def test_problem_lines_point_at_the_front_matter_key(tmp_path):
    kb_dir = make_kb(tmp_path)
    path = write_source(tmp_path, "cap", **{**GIT, "commit": "nothex"})
    n = next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.startswith("commit:"))
    (problem,) = load_kb(str(kb_dir), use_cache=False).problems
    assert (problem.code, problem.line) == ("KB022", n)
    assert str(problem) == f"evidence/cap.md:{n}: KB022 commit: must be 40 lower-case hex digits, got 'nothex'"


@pytest.mark.parametrize("evidence, message", [
    (["q-one"], "'q-one' is a bare id; write it as `- quote: q-one` with `supports:`"),
    ([{"quote": "q-one"}], "'q-one' needs `supports:`"),
    ([{"quote": "q-one", "supports": "  "}], "'q-one' needs `supports:`"),
    ([{"supports": "why"}], "an item needs `quote:`"),
    ([{"quote": "q-one", "supports": "x" * 201}], "one line of at most 200 characters (this one has 201)"),
    ([{"quote": "q-one", "supports": "two\nlines"}], "one line of at most 200 characters"),
    ("q-one", "must be a list of"),
])
def test_evidence_items_are_quote_and_supports(tmp_path, evidence, message):
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("cites", evidence=evidence))
    kb = load_kb(str(kb_dir), use_cache=False)
    (problem,) = kb.problems
    assert problem.code == "KB023" and problem.path == "kb/entries/loss/cites.yaml" and message in problem.message, \
        str(problem)
    assert kb.entries["cites"].evidence == []


def test_evidence_citations_load_in_order_and_unknown_keys_are_named(tmp_path):
    kb_dir = make_kb(tmp_path)
    write_quotes(tmp_path, "more", [{"id": "q-two", "source": "src", "lines": [11, 11], "text": "line two",
                                     "themes": ["x"], "author": "Someone"}])
    write_entry(tmp_path, entry("cites", evidence=[cite("q-two", "second first"), cite("q-one", "then the first"),
                                                  {**cite("q-one"), "suports": "typo"}]))
    kb = load_kb(str(kb_dir), use_cache=False)
    assert [str(p).split(": ", 1)[1] for p in kb.problems] == [
        "KB005 evidence: unknown citation field 'suports' (did you mean 'supports'?)"]
    e = kb.entries["cites"]
    assert e.quote_ids == ["q-two", "q-one", "q-one"]
    assert [c["supports"] for c in e.evidence][:2] == ["second first", "then the first"]
    assert kb.quotes["q-two"].author == "Someone" and kb.quotes["q-one"].author is None


def test_every_code_has_a_test():  # the docs are generated from CHECK_CODES (tests/test_docs.py)
    here = open(__file__).read()
    assert [code for code in CODES if f'("{code}"' not in here] == []


def test_all_problems_are_collected_together(tmp_path):
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("two-faults", see_also=["nope"], snippet_kind="maybe", symptoms=["one"]))
    write_source(tmp_path, "second", coverage="partial")
    assert {"KB010", "KB008", "KB013"} <= set(codes(kb_dir))


def test_cache_never_serves_a_stale_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    kb_dir = make_kb(tmp_path)
    assert load_kb(str(kb_dir)).entries["alpha-bug"].title == "Title of alpha-bug"
    assert any((tmp_path / "cache").iterdir())
    path = tmp_path / "kb" / "entries" / "loss" / "alpha-bug.yaml"
    stat = path.stat()
    path.write_text(path.read_text().replace("Title of alpha-bug", "Title of alpha-bux"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size and mtime: only ctime moves
    assert load_kb(str(kb_dir)).entries["alpha-bug"].title == "Title of alpha-bux"


def test_cached_load_equals_fresh_load(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    kb_dir = make_kb(tmp_path)
    first, second = load_kb(str(kb_dir)), load_kb(str(kb_dir))
    fresh = load_kb(str(kb_dir), use_cache=False)
    assert second.entries == fresh.entries == first.entries
    assert second.quotes == fresh.quotes and second.sources == fresh.sources


NOTE = "Searched the torch docs and source and the issue tracker; none states it."


def test_an_evidence_note_loads_on_an_entry_without_quotes_and_is_checked(tmp_path):
    kb_dir = make_kb(tmp_path)
    path = write_entry(tmp_path, entry("unsourced", evidence_note=NOTE))
    kb, found = problems(kb_dir)
    assert found == [] and kb.entries["unsourced"].evidence_note == NOTE
    assert kb.entries["alpha-bug"].evidence_note is None
    write_entry(tmp_path, entry("unsourced", evidence=[cite("q-one")], evidence_note=NOTE))
    (problem,) = load_kb(str(kb_dir), use_cache=False).problems
    n = next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.startswith("evidence_note:"))
    assert (problem.code, problem.line, problem.field) == ("KB028", n, "evidence_note")
    write_entry(tmp_path, entry("unsourced", evidence_note="  "))
    assert [(p.code, p.field) for p in load_kb(str(kb_dir), use_cache=False).problems] == [("KB004", "evidence_note")]


MAX_UNSOURCED = 2  # entries that may go without a quote, each saying why in `evidence_note`


def evidence_gaps(kb) -> list:
    """What breaks the evidence rule: more than MAX_UNSOURCED entries without quotes, or one of them
    without an `evidence_note` saying why and where was searched."""
    unsourced = sorted(e.id for e in kb.entries.values() if not e.evidence)
    gaps = [f"{eid}: no evidence and no evidence_note" for eid in unsourced if not kb.entries[eid].evidence_note]
    if len(unsourced) > MAX_UNSOURCED:
        gaps.append(f"{len(unsourced)} entries without evidence (at most {MAX_UNSOURCED}): {', '.join(unsourced)}")
    return gaps


def test_the_evidence_rule_catches_a_missing_note_and_too_many_unsourced_entries(tmp_path):
    kb_dir = make_kb(tmp_path)  # beta-bug has no quote and no note
    assert evidence_gaps(load_kb(str(kb_dir), use_cache=False)) == ["beta-bug: no evidence and no evidence_note"]
    write_entry(tmp_path, entry("beta-bug", area="numerics", evidence_note=NOTE))
    assert evidence_gaps(load_kb(str(kb_dir), use_cache=False)) == []
    for eid in ("gamma-bug", "delta-bug"):
        write_entry(tmp_path, entry(eid, evidence_note=NOTE))
    assert evidence_gaps(load_kb(str(kb_dir), use_cache=False)) == [
        "3 entries without evidence (at most 2): beta-bug, delta-bug, gamma-bug"]


def test_shipped_entries_cite_evidence_or_say_why_not(shipped_kb):
    assert evidence_gaps(shipped_kb) == []


def test_shipped_kb_is_clean():
    kb = load_kb(use_cache=False)
    assert [str(p) for p in kb.problems] == []
    assert len(kb.entries) >= 5


def test_write_atomic_keeps_permissions_and_leaves_no_temp_file(tmp_path):
    from kb_tools.core.util import write_atomic
    path = tmp_path / "quotes.yaml"
    path.write_text("old\n")
    path.chmod(0o640)
    write_atomic(str(path), "new \u2014 text\r\n")
    assert path.read_bytes() == "new \u2014 text\r\n".encode() and (path.stat().st_mode & 0o777) == 0o640
    with pytest.raises(OSError):
        write_atomic(str(tmp_path / "no-such-folder" / "x"), b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quotes.yaml"]


# ---------------------------------------------------------------- mentions of other entries (KB025)

@pytest.mark.parametrize("field, text, named", [
    ("check", "It differs from `gone-bug` (no floor).", "gone-bug"),
    ("caveats", "For the other case see gone-bug.", "gone-bug"),
    ("correction", "Older advice (see\n  `gone-bug`) is wrong.", "gone-bug"),
    ("cause", "Like `alpha-bugs`, but worse.", "alpha-bugs"),
])
def test_dead_mention_names_file_field_and_word(tmp_path, field, text, named):
    kb_dir = make_kb(tmp_path)
    path = write_entry(tmp_path, entry("mentions", **{field: text}))
    (problem,) = load_kb(str(kb_dir), use_cache=False).problems
    n = next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.startswith(f"{field}:"))
    assert (problem.code, problem.path, problem.line, problem.field) == ("KB025", "kb/entries/loss/mentions.yaml", n, field)
    assert f"names '{named}', which is no entry's id or alias" in problem.message


@pytest.mark.parametrize("text", [
    "Compare alpha-bug and `beta-bug`; see A1 and see `alpha-bug`.",   # real ids and an alias
    "Sum the micro-batch losses, not the per-micro-batch means.",       # ordinary hyphenated words
    "Call `model.no_sync()` and `torch.cuda.amp`; `1e-3` and `x - y`.",  # code that is not a kebab word
    "Run `pip install torch-lr-finder` first.",                          # a kebab word inside longer code
    "See the docs at https://example.org/some-page-name/ for more.",    # part of an address
])
def test_ordinary_prose_is_no_dead_mention(tmp_path, text):
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("mentions", check=text))
    assert codes(kb_dir) == []


def test_renaming_an_entry_leaves_kb025_where_it_was_named(tmp_path):
    """The shipped KB, copied, with lr-too-low renamed: every backticked or `see` mention is reported."""
    import shutil
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    shutil.copytree(os.path.join(repo, "kb"), tmp_path / "kb")
    shutil.copytree(os.path.join(repo, "evidence"), tmp_path / "evidence")
    old = tmp_path / "kb" / "entries" / "optimizer" / "lr-too-low.yaml"
    old.write_text(old.read_text().replace("id: lr-too-low", "id: lr-much-too-low"))
    old.rename(old.with_name("lr-much-too-low.yaml"))
    kb = load_kb(str(tmp_path / "kb"), use_cache=False)
    dead = {(p.path, p.field) for p in kb.problems if p.code == "KB025"}
    assert {p.code for p in kb.problems} == {"KB025", "KB010"}, [str(p) for p in kb.problems]  # KB010: see_also
    expected = set()
    for e in kb.entries.values():
        for field in ("cause", "fix", "check", "caveats", "correction", "snippet_note"):
            text = " ".join((getattr(e, field) or "").split())
            if "`lr-too-low`" in text or re.search(r"\bsee lr-too-low\b", text, re.I):
                expected.add((e.path, field))
    assert len(expected) >= 2 and dead == expected
    assert all("names 'lr-too-low'" in p.message for p in kb.problems if p.code == "KB025")


# ---------------------------------------------------------------- fix_pair

PAIR = {"before": "assert torch.allclose(x.grad, torch.full_like(x, 2.0))\n",
        "after": "x = torch.randn(8, requires_grad=True)\n(x * 2).sum().backward()\n"}


def test_fix_pair_loads_when_both_sides_are_in_the_snippet(tmp_path):
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("paired", fix_pair=PAIR))
    kb = load_kb(str(kb_dir), use_cache=False)
    assert kb.problems == []
    assert kb.entries["paired"].fix_pair == {k: v.rstrip("\n") for k, v in PAIR.items()}
    assert kb.entries["alpha-bug"].fix_pair is None


def test_fix_pair_side_matches_the_snippet_whatever_its_indentation(tmp_path):
    kb_dir = make_kb(tmp_path)
    snippet = "import torch\ndef f(x):\n    y = x.softmax(-1)\n    return y\nassert f(torch.zeros(2)).sum() == 1\n"
    write_entry(tmp_path, entry("paired", snippet=snippet,
                                fix_pair={"before": "y = x.softmax(-1)\nreturn y\n", "after": "return y\n"}))
    assert codes(kb_dir) == []


@pytest.mark.parametrize("pair, message", [
    ({**PAIR, "after": "x = torch.randn(9)\n"}, "`after` is not in the snippet line for line"),
    ({**PAIR, "before": "(x * 2).sum().backward()\nx = torch.randn(8, requires_grad=True)\n"},
     "`before` is not in the snippet line for line"),
    ({"before": PAIR["before"]}, "must have exactly `before:` and `after:`"),
    ({**PAIR, "extra": "x"}, "must have exactly `before:` and `after:`"),
    ({**PAIR, "after": "  \n"}, "`after` must be non-empty code"),
    ({**PAIR, "after": "x = 1\n" * 9}, "`after` has 9 lines; at most 8"),
    ({"before": PAIR["after"], "after": PAIR["after"]}, "`before` and `after` are the same code"),
    ("x = 1", "must be a mapping of `before:` and `after:`"),
])
def test_fix_pair_problems_name_the_field(tmp_path, pair, message):
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("paired", fix_pair=pair))
    kb = load_kb(str(kb_dir), use_cache=False)
    (problem,) = kb.problems
    assert (problem.code, problem.path, problem.field) == ("KB004", "kb/entries/loss/paired.yaml", "fix_pair")
    assert message in problem.message, str(problem)
    assert kb.entries["paired"].fix_pair is None or "snippet" in message
HARNESS = ("import torch\n"
           "def train(opt_name, lr, warmup=0):\n"
           "    model = torch.nn.Linear(2, 1)\n"
           "    opt = torch.optim.SGD(model.parameters(), lr=lr)\n"
           "    return model(torch.ones(1, 2)).sum().item()\n"
           "def make_optimizer(params, lr):\n"
           "    return torch.optim.SGD(params, lr=lr)\n"
           "bad = train(\"sgd\", 0.5)\n"
           "good = train(\"sgd\", 0.05, warmup=20)\n"
           "good = train(\"sgd\", make_optimizer([], lr=0.05))\n"
           "items = [train(\"sgd\", lr) for lr in (0.5,)]\n"
           "fixed = [train(\"sgd\", lr, warmup=5) for lr in (0.5,)]\n"
           "opt = make_optimizer([torch.zeros(1, requires_grad=True)], lr=0.5)\n"
           "opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.05)\n"
           "assert bad == bad and good == good\n")


@pytest.mark.parametrize("pair, refused", [
    ({"before": "bad = train(\"sgd\", 0.5)", "after": "good = train(\"sgd\", 0.05, warmup=20)"}, "train"),
    ({"before": "items = [train(\"sgd\", lr) for lr in (0.5,)]",
      "after": "fixed = [train(\"sgd\", lr, warmup=5) for lr in (0.5,)]"}, "train"),
    # the user's own line on one side: the pair shows code a user writes
    ({"before": "opt = make_optimizer([torch.zeros(1, requires_grad=True)], lr=0.5)",
      "after": "opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.05)"}, None),
    # the switch given as an expression is a switch too
    ({"before": "bad = train(\"sgd\", 0.5)", "after": "good = train(\"sgd\", make_optimizer([], lr=0.05))"}, "train"),
    # real lines on both sides
    ({"before": "model = torch.nn.Linear(2, 1)", "after": "opt = torch.optim.SGD(model.parameters(), lr=lr)"}, None),
])
def test_fix_pair_that_only_switches_the_snippets_harness_is_refused(tmp_path, pair, refused):
    kb_dir = make_kb(tmp_path)
    path = write_entry(tmp_path, entry("paired", snippet=HARNESS, fix_pair=pair))
    kb = load_kb(str(kb_dir), use_cache=False)
    found = [(p.code, p.path, p.field) for p in kb.problems]
    if refused is None:
        assert found == []
        return
    (problem,) = kb.problems
    assert found == [("KB029", "kb/entries/loss/paired.yaml", "fix_pair")]
    assert f"`{refused}()`" in problem.message and problem.line == \
        path.read_text().splitlines().index("fix_pair:") + 1


def test_no_shipped_fix_pair_is_a_harness_switch():
    kb = load_kb(os.path.join(REPO, "kb"), use_cache=False)
    assert [p for p in kb.problems if p.code == "KB029"] == []


def test_tag_outside_the_vocabulary_names_file_line_and_nearest_tag(tmp_path):
    kb_dir = make_kb(tmp_path)
    write_vocabulary(tmp_path, {"demo": "A tag.", "fine-tuning": "Starting from pretrained weights."})
    path = write_entry(tmp_path, entry("tagged", tags=["demo", "finetuning"]))
    line = path.read_text().splitlines().index("- finetuning") + 1
    _, found = problems(kb_dir)
    assert found == [f"kb/entries/loss/tagged.yaml:{line}: KB026 tags: tag 'finetuning' is not in the "
                     f"vocabulary (kb/tags.yaml) (did you mean 'fine-tuning'?)"]
    assert load_kb(str(kb_dir), use_cache=False).vocabulary["fine-tuning"] == "Starting from pretrained weights."


@pytest.mark.parametrize("text, message", [
    (None, "kb/tags.yaml: KB026 tags: no tag vocabulary: create kb/tags.yaml"),
    ("- demo\n", "kb/tags.yaml:1: KB026 tags: expected `tags:` mapping each tag to a one-line meaning"),
    ("tags:\n  demo: A tag.\n  Bad_Tag: x\n", "kb/tags.yaml:3: KB026 tags: 'Bad_Tag' is not a kebab-case tag"),
    ("tags:\n  demo:\n", "kb/tags.yaml:2: KB026 tags: 'demo' needs its meaning"),
])
def test_missing_or_malformed_vocabulary_is_one_clear_problem(tmp_path, text, message):
    kb_dir = make_kb(tmp_path)
    vocabulary = tmp_path / "kb" / "tags.yaml"
    if text is None:
        vocabulary.unlink()
    else:
        vocabulary.write_text(text)
    _, found = problems(kb_dir)
    assert any(p.startswith(message) for p in found), found
    assert len([p for p in found if p.startswith("kb/tags.yaml")]) == 1, found


def test_cache_follows_the_vocabulary(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    kb_dir = make_kb(tmp_path)
    assert load_kb(str(kb_dir)).problems == []
    write_vocabulary(tmp_path, {"other": "Not the tag the entries use."})
    assert {p.code for p in load_kb(str(kb_dir)).problems} == {"KB026"}


def test_shipped_vocabulary_is_used_and_shared():
    """Every tag of kb/tags.yaml is on two or more entries: a tag on one entry indexes nothing."""
    kb = load_kb(use_cache=False)
    assert kb.vocabulary and not kb.problems
    users = {tag: [e.id for e in kb.entries.values() if tag in e.tags] for tag in kb.vocabulary}
    assert {tag: ids for tag, ids in users.items() if len(ids) < 2} == {}
