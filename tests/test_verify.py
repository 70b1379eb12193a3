"""kb verify: one test per defect kind, the formatting that must pass, --fix-lines, the CLI."""
from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest
import yaml

from kb_tools import cli
from kb_tools.core.load import load_kb
from kb_tools.verify.quotes import PackageTexts, normalise, quote_parts, verify_kb

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "verify")

FRONT = textwrap.dedent("""\
    ---
    title: A field guide
    author: Someone
    kind: primary
    url: https://example.org/guide
    published: 2020-01-01
    retrieved: 2026-11-22
    coverage: excerpt
    ---
    """)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))


def make_kb(root, quotes, body=None, extra_sources=()):
    """A KB with evidence/guide.md (the fixture text) and one quote file; returns kb/."""
    (root / "kb" / "entries").mkdir(parents=True)
    (root / "evidence").mkdir()
    with open(os.path.join(FIXTURES, "guide.md"), encoding="utf-8") as fh:
        (root / "evidence" / "guide.md").write_text(FRONT + (body if body is not None else fh.read()))
    for sid, text in extra_sources:
        (root / "evidence" / f"{sid}.md").write_text(text)
    (root / "kb" / "quotes").mkdir()
    (root / "kb" / "quotes" / "guide.yaml").write_text(yaml.safe_dump({"quotes": quotes}, sort_keys=False))
    return root / "kb"


def q(qid, text, lines, **kw):
    return {"id": qid, "source": kw.pop("source", "guide"), "lines": lines, "text": text,
            "themes": ["demo"], **kw}


def kinds(kb_dir):
    kb = load_kb(str(kb_dir), use_cache=False)
    report = verify_kb(kb)
    found = {d.quote: d for d in report.defects + report.unchecked}
    return {qid: (found[qid].kind if qid in found else None) for qid in kb.quotes}, found, report


# The fixture (tests/fixtures/verify/guide.md) body starts at file line 10.
#  L10 "# Notes on training"
#  L12-13 fox paragraph, L15-16 gradients paragraph, L18 scheduler line, L20 one-word line


def test_verbatim_and_formatting_variants_pass(tmp_path):
    quotes = [
        q("exact", "The quick brown fox jumps over the lazy dog.", [12, 12]),
        q("reflowed", "The quick brown\nfox   jumps over\n\nthe lazy dog.", [12, 12]),
        q("emphasis", 'It was a sunny day in the "old" town, and nobody noticed', [12, 13]),
        q("curly-and-ellipsis", "in the \u201cold\u201d town, and nobody noticed\u2026 the fox at all.", [13, 13]),
        q("straight-ellipsis", 'in the "old" town, and nobody noticed... the fox at all.', [13, 13]),
        q("markup-in-quote", "Gradients **add up** by default; *zero* them each `iteration` before the next "
                             "backward pass.", [15, 16]),
        q("elided", "The quick brown fox [...] It was a sunny day [...] the fox at all.", [12, 13]),
        q("elided-adjacent", "The quick brown fox [...] jumps over the lazy dog.", [12, 12]),
        q("short-marked", "lazy dog", [12, 12], short=True),
    ]
    result, found, _ = kinds(make_kb(tmp_path, quotes))
    assert result == {k["id"]: None for k in quotes}, {k: str(v) for k, v in found.items()}


@pytest.mark.parametrize("text, lines, kind, needle", [
    ("Overfit a tiny batch before you tune anything at all.", [12, 12], "not-found", "is not in"),
    ("The quick brown cat jumps over the lazy dog.", [12, 12], "words-changed", "swapped 'fox' -> 'cat'"),
    ("The quick brown fox jumps over the very lazy dog.", [12, 12], "words-changed", "added 'very'"),
    ("The quick fox jumps over the lazy dog.", [12, 12], "words-changed", "dropped 'brown'"),
    ("It was a sunny day [...] The quick brown fox jumps", [12, 12], "out-of-order", "not in the quoted order"),
    ("The quick brown fox jumps over the", [12, 12], "truncated", "stops mid-sentence after 'the'"),
    ("lazy dog", [12, 12], "too-short", "2 word(s)"),
    ("The quick brown fox jumps over the lazy dog.", [15, 16], "wrong-lines", "the text is at L12-12"),
])
def test_each_defect_kind_has_its_own_message(tmp_path, text, lines, kind, needle):
    result, found, _ = kinds(make_kb(tmp_path, [q("one", text, lines)]))
    assert result == {"one": kind}
    defect = found["one"]
    assert needle in defect.message, str(defect)
    assert defect.path.endswith("guide.yaml") and defect.line == 2


def test_words_changed_reports_diff_and_passage_lines(tmp_path):
    text = "Gradients add up by default; zero them every iteration before the next backward pass."
    _, found, _ = kinds(make_kb(tmp_path, [q("g", text, [15, 16])]))
    d = found["g"]
    assert d.kind == "words-changed"
    assert "swapped 'each' -> 'every'" in d.message
    assert "[-each-]" in d.diff and "{+every+}" in d.diff
    assert d.where.endswith("evidence/guide.md:L15-16") and d.lines == [15, 16]


def test_a_dropped_comma_is_a_changed_passage_shown_in_context(tmp_path):
    text = 'It was a sunny day in the "old" town and nobody noticed'   # the source: `"old" town, and`
    _, found, _ = kinds(make_kb(tmp_path, [q("c", text, [12, 13])]))
    d = found["c"]
    assert d.kind == "words-changed", str(d)
    assert d.message == 'dropped `,`: the source has `the "old" town, and nobody`, the quote `the "old" town and nobody`'
    assert 'town[-,-] and' in d.diff and d.where.endswith("evidence/guide.md:L12-13")


@pytest.mark.parametrize("text, lines, needle", [
    ("The quick brown fox jumps over the lazy dog, It was a sunny day", [12, 12], "changed `.` -> `,`"),
    ("The quick brown fox jumps over the lazy dog,", [12, 12], "changed `.` -> `,`"),
    ("Second thought: gradients add up by default, zero them each iteration before the next backward pass.",
     [15, 16], "changed `;` -> `,`: the source has `up by default; zero them`"),
    ("The quick, brown fox jumps over the lazy dog.", [12, 12], "added `,`"),
    ("in the old town, and nobody noticed", [13, 13], 'dropped `"`: the source has `day in the "old" town,`, '
                                                     'the quote `in the old town,`'),
    ("Second thought gradients add up by default; zero them each iteration before the next backward pass.",
     [15, 16], "dropped `:`"),
    # a mark next to an elision is the editor's; one inside a part is not
    ('The quick brown fox [...] It was a sunny day, in the "old" town [...]', [12, 13], "part 2 of 2: added `,`"),
])
def test_every_changed_mark_is_words_changed(tmp_path, text, lines, needle):
    result, found, _ = kinds(make_kb(tmp_path, [q("m", text, lines)]))
    assert result == {"m": "words-changed"}, {k: str(v) for k, v in found.items()}
    assert needle in found["m"].message, str(found["m"])


MARKS_BODY = textwrap.dedent("""\
    Warm up the learning rate \u2014 a few hundred steps \u2013 then decay it.
    The model\u2019s loss at init should be near\u00a0log(10), a well-
    known check, and \u201cthe\u201d first one.

    > Quoted advice: never trust a
    > loss curve alone.

    - first item of a list
    - second item of a list
    """)   # body from L10


def test_typographic_variants_and_markup_are_not_marks(tmp_path):
    quotes = [
        q("hyphens-for-dashes", "Warm up the learning rate - a few hundred steps - then decay it.", [10, 10]),
        q("double-hyphens", "Warm up the learning rate--a few hundred steps--then decay it.", [10, 10]),
        q("straight-apostrophe-nbsp-hyphenation", "The model's loss at init should be near log(10), a "
                                                  "well-known check, and \"the\" first one.", [11, 12]),
        q("blockquote-markers", "Quoted advice: never trust a loss curve alone.", [14, 15]),
        q("bullets", "first item of a list second item of a list", [17, 18]),
        q("stops-before-the-period", "Warm up the learning rate - a few hundred steps - then decay it", [10, 10]),
        q("marks-at-elisions", "Warm up the learning rate, [...]; then decay it. [...]", [10, 10]),
        q("mark-only-after-elision", "The model's loss at init should be near log(10) [...].", [11, 11]),
    ]
    result, found, _ = kinds(make_kb(tmp_path, quotes, body=MARKS_BODY))
    assert result == {k["id"]: None for k in quotes}, {k: str(v) for k, v in found.items()}


def test_straight_and_curly_marks_of_one_kind_only_are_equal(tmp_path):
    quotes = [q("single-for-double", "The model's loss at init should be near log(10), a well-known check, "
                                     "and 'the' first one.", [11, 12]),
              q("colon-for-comma", "The model's loss at init should be near log(10): a well-known check.", [11, 12])]
    result, found, _ = kinds(make_kb(tmp_path, quotes, body=MARKS_BODY))
    assert result == {"single-for-double": "words-changed", "colon-for-comma": "words-changed"}
    assert "changed `\"` -> `'`" in found["single-for-double"].message
    assert "changed `,` -> `:`" in found["colon-for-comma"].message


PY_SOURCE = FRONT.replace("retrieved: 2026-11-22\n", "repo: someone/trainer\ncommit: " + "a" * 40 +
                          "\npath: trainer/config.py\n") + textwrap.dedent('''\
    answer_only_loss: bool = field(
        default=False,
        metadata={"help": ("Whether to compute the loss only on the answer. If `True`, the "
                           "prompt tokens are masked out of the loss, "
                           f"which is what the trainer wants.")},
    )
    ''')   # body from L10


def test_a_python_source_reads_joined_string_literals_as_one_string(tmp_path):
    quotes = [q("joined", "Whether to compute the loss only on the answer. If True, the prompt tokens are masked "
                          "out of the loss, which is what the trainer wants.", [14, 16], source="code"),
              q("comma-dropped", "If True the prompt tokens are masked out of the loss, which is what the trainer "
                                 "wants.", [14, 16], source="code")]
    result, found, _ = kinds(make_kb(tmp_path, quotes, extra_sources=[("code", PY_SOURCE)]))
    assert result == {"joined": None, "comma-dropped": "words-changed"}, {k: str(v) for k, v in found.items()}
    assert "dropped `,`" in found["comma-dropped"].message
    # the same lines in a Markdown source are text: their quote marks count
    md = PY_SOURCE.replace("repo: someone/trainer\ncommit: " + "a" * 40 + "\npath: trainer/config.py\n",
                           "retrieved: 2026-11-22\n")
    text = "Whether to compute the loss only on the answer. If True, the prompt tokens are masked out of the loss, [...]"
    result, found, _ = kinds(make_kb(tmp_path / "md", [q("joined", text, [12, 13], source="code")],
                                     extra_sources=[("code", md)]))
    assert result == {"joined": "words-changed"}, {k: str(v) for k, v in found.items()}


def test_an_editorial_insertion_counts_words_not_marks(tmp_path):
    quotes = [q("three-words", "Warm up [the warmup] - a few hundred steps - then decay it.", [10, 10]),
              q("four-words", "Warm [that] - a few hundred steps - then decay it.", [10, 10])]
    result, found, _ = kinds(make_kb(tmp_path, quotes, body=MARKS_BODY))
    assert result == {"three-words": None, "four-words": "words-changed"}, {k: str(v) for k, v in found.items()}
    assert "stands in for 4 source words ('up the learning rate')" in found["four-words"].message


def test_elided_part_with_a_changed_word_names_the_part(tmp_path):
    text = "The quick brown fox [...] It was a rainy day in the old town"
    _, found, _ = kinds(make_kb(tmp_path, [q("p", text, [12, 13])]))
    assert found["p"].kind == "words-changed"
    assert found["p"].message.startswith("part 2 of 2: swapped 'sunny' -> 'rainy'")


def test_unknown_source_suggests_the_near_id(tmp_path):
    _, found, _ = kinds(make_kb(tmp_path, [q("u", "The quick brown fox jumps over the lazy dog.", [12, 12],
                                             source="guid")]))
    assert found["u"].kind == "unknown-source"
    assert "evidence/guid.md" in found["u"].message and "did you mean 'guide'" in found["u"].message


def test_missing_cache_file_is_unknown_source(tmp_path):
    kb_dir = make_kb(tmp_path, [q("m", "The quick brown fox jumps over the lazy dog.", [12, 12])])
    kb = load_kb(str(kb_dir), use_cache=False)
    os.remove(tmp_path / "evidence" / "guide.md")  # deleted after loading: the cache file is gone
    report = verify_kb(kb)
    assert [d.kind for d in report.defects] == ["unknown-source"]
    assert "cannot read the cache file" in report.defects[0].message


def test_ending_at_a_sentence_or_with_an_elision_mark_is_not_truncated(tmp_path):
    quotes = [q("marked", "The quick brown fox jumps over the [...]", [12, 12]),
              q("marked-dots", "The quick brown fox jumps over the...", [12, 12]),
              q("colon", "Second thought: gradients add up by default;", [15, 15]),
              q("para-end", "the lr scheduler only after the optimizer", [18, 18])]
    result, found, _ = kinds(make_kb(tmp_path, quotes))
    assert result == {k["id"]: None for k in quotes}, {k: str(v) for k, v in found.items()}


def test_repeated_text_prefers_the_cited_occurrence(tmp_path):
    body = ("Always check the loss at init.\n\nfiller line\n\nAlways check the loss at init.\n")
    quotes = [q("first", "Always check the loss at init.", [10, 10]),
              q("second", "Always check the loss at init.", [14, 14]),
              q("neither", "Always check the loss at init.", [12, 12])]
    result, found, _ = kinds(make_kb(tmp_path, quotes, body=body))
    assert result == {"first": None, "second": None, "neither": "wrong-lines"}
    assert found["neither"].found in ([10, 10], [14, 14])


# ---------------------------------------------------------------- package sources

PKG_SOURCE = FRONT.replace("coverage: excerpt", "coverage: excerpt\npackage: fakepkg\nversion: \"1.0\"") + \
    "## `fakepkg.Widget.step` (docstring)\n\nnot used by the check\n\n## `fakepkg.Widget` (docstring)\n"


@pytest.fixture
def fakepkg(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "fakepkg").mkdir(parents=True)
    (site / "fakepkg" / "__init__.py").write_text(textwrap.dedent('''\
        import warnings


        class Widget:
            """A widget for tests.

            Turning the :class:`~fakepkg.Knob` past ``11`` makes the widget
            louder, which is the whole point of a widget.
            """

            def step(self):
                """Advance the widget by one step."""
                warnings.warn("Detected a call of `step()` before `start()`. "
                              "Call them in the other order.")
        '''))
    (site / "fakepkg-1.0.dist-info").mkdir()
    (site / "fakepkg-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.0\n\n")
    monkeypatch.syspath_prepend(str(site))
    sys.modules.pop("fakepkg", None)
    yield site
    sys.modules.pop("fakepkg", None)


def test_package_quotes_check_the_installed_docstring_and_messages(tmp_path, fakepkg):
    quotes = [
        {"id": "doc", "source": "pkg", "object": "fakepkg.Widget", "themes": ["demo"],
         "text": "Turning the Knob past 11 makes the widget louder, which is the whole point of a widget."},
        {"id": "msg", "source": "pkg", "object": "fakepkg.Widget.step", "themes": ["demo"],
         "text": "Detected a call of step() before start(). Call them in the other order."},
        {"id": "changed", "source": "pkg", "object": "fakepkg.Widget", "themes": ["demo"],
         "text": "Turning the Knob past 12 makes the widget louder, which is the whole point of a widget."},
        {"id": "wrong-object", "source": "pkg", "object": "fakepkg.Widget.step", "themes": ["demo"],
         "text": "Turning the Knob past 11 makes the widget louder, which is the whole point of a widget."},
        {"id": "no-object", "source": "pkg", "object": "fakepkg.Gadget", "themes": ["demo"],
         "text": "Turning the Knob past 11 makes the widget louder, which is the whole point of a widget."},
    ]
    kb_dir = make_kb(tmp_path, quotes, extra_sources=[("pkg", PKG_SOURCE)])
    result, found, report = kinds(kb_dir)
    assert result == {"doc": None, "msg": None, "changed": "words-changed", "wrong-object": "wrong-lines",
                      "no-object": "unknown-source"}, {k: str(v) for k, v in found.items()}
    assert report.packages == {"fakepkg": "1.0"}
    assert "fakepkg.Widget docstring (fakepkg 1.0)" in found["changed"].where
    assert "the text is in fakepkg.Widget" in found["wrong-object"].message


def test_package_texts_are_cached_per_installed_version(tmp_path, fakepkg):
    cache = tmp_path / "pkgcache"
    first = PackageTexts(str(cache))
    assert first.segments("fakepkg", "fakepkg.Widget")[0][0] == "docstring"
    first.save()
    (fakepkg / "fakepkg" / "__init__.py").write_text('class Widget:\n    """Rewritten."""\n')
    assert PackageTexts(str(cache)).segments("fakepkg", "fakepkg.Widget")[0][1].startswith("A widget")
    (fakepkg / "fakepkg-1.0.dist-info" / "METADATA").write_text("Name: fakepkg\nVersion: 1.1\n\n")
    import importlib
    sys.modules.pop("fakepkg", None)
    importlib.invalidate_caches()
    assert PackageTexts(str(cache)).segments("fakepkg", "fakepkg.Widget") == [("docstring", "Rewritten.")]


def test_absent_package_is_unchecked_and_strict_fails(tmp_path, capsys):
    source = PKG_SOURCE.replace("package: fakepkg", "package: no-such-package-kb-test")
    quotes = [{"id": "gone", "source": "pkg", "object": "no_such_package_kb_test.Thing", "themes": ["demo"],
               "text": "Some words that cannot be checked on this machine at all."},
              q("fine", "The quick brown fox jumps over the lazy dog.", [12, 12])]
    kb_dir = make_kb(tmp_path, quotes, extra_sources=[("pkg", source)])
    result, found, report = kinds(kb_dir)
    assert result == {"gone": "unchecked", "fine": None}
    assert report.ok() and not report.ok(strict=True) and report.passed == 1
    assert cli.main(["--kb", str(kb_dir), "verify"]) == 0
    out = capsys.readouterr().out
    assert "1 unchecked" in out and "no-such-package-kb-test not installed" in out
    assert cli.main(["--kb", str(kb_dir), "verify", "--strict"]) == 1


# ---------------------------------------------------------------- --fix-lines

QUOTE_FILE = textwrap.dedent("""\
    # Quotes from the guide; comments must survive --fix-lines.
    quotes:
      - id: flow            # the usual form
        source: guide
        lines: [40, 41]     # stale
        text: >-
          The quick brown fox jumps
          over the lazy dog.
        themes: [demo]
      - id: block
        source: guide
        lines:
          - 1
          - 2
        text: "Gradients add up by default; zero them each iteration before the next backward pass."
        themes: [demo]
      - id: scalar
        source: guide
        lines: 3
        text: 'the lr scheduler only after the optimizer'
        themes: [demo]
      - id: untouched
        source: guide
        lines: [12, 12]
        text: The quick brown fox jumps over the lazy dog.
        themes: [demo]
    """)


def test_fix_lines_rewrites_only_the_line_values(tmp_path, capsys):
    kb_dir = make_kb(tmp_path, [])
    path = kb_dir / "quotes" / "guide.yaml"
    path.write_text(QUOTE_FILE)
    assert cli.main(["--kb", str(kb_dir), "verify"]) == 1
    assert cli.main(["--kb", str(kb_dir), "verify", "--fix-lines"]) == 0
    out = capsys.readouterr().out
    assert "fixed lines in kb/quotes/guide.yaml" in out and "4 verbatim, 0 failed" in out
    after = path.read_text()
    expected = (QUOTE_FILE.replace("lines: [40, 41]     # stale", "lines: [12, 12]     # stale")
                .replace("lines:\n      - 1\n      - 2\n", "lines:\n      - 15\n      - 16\n")
                .replace("lines: 3\n", "lines: 18\n"))
    assert after == expected
    assert not [n for n in os.listdir(path.parent) if n.endswith(".tmp")]
    assert cli.main(["--kb", str(kb_dir), "verify", "--fix-lines"]) == 0
    assert path.read_text() == expected  # a clean KB is left alone


def test_fix_lines_leaves_other_defects_and_fails(tmp_path, capsys):
    kb_dir = make_kb(tmp_path, [q("bad", "The quick brown cat jumps over the lazy dog.", [40, 40])])
    before = (kb_dir / "quotes" / "guide.yaml").read_text()
    assert cli.main(["--kb", str(kb_dir), "verify", "--fix-lines"]) == 1
    assert (kb_dir / "quotes" / "guide.yaml").read_text() == before
    assert "words-changed" in capsys.readouterr().out


# ---------------------------------------------------------------- attribution, hashes, editorial brackets

RETELLING = textwrap.dedent("""\
    ---
    title: Notes on a field guide
    author: Note Keeper
    kind: secondary
    retells:
      title: A field guide
      author: Someone
      url: https://example.org/guide
    url: https://example.org/notes
    published: 2021-01-01
    retrieved: 2026-11-22
    coverage: excerpt
    ---
    The guide says to recieve each batch and then check that the loss at init is near log of the classes.
    """)  # body at L14; "recieve" is the retelling's own spelling


@pytest.mark.parametrize("qid, source, author, kind, needle", [
    ("unattributed", "guide", None, None, None),           # no `author`: the source's author
    ("same-author", "guide", "Someone", None, None),
    ("other-author", "guide", "Someone Else", "wrong-author",
     "attributed to Someone Else, but the text of evidence/guide.md was written by Someone"),
    ("retold-as-primary", "notes", "Someone", "wrong-author",
     "evidence/notes.md is Note Keeper's retelling of Someone's 'A field guide' (kind: secondary): its words are "
     "Note Keeper's"),
    ("retelling-author", "notes", "Note Keeper", None, None),
])
def test_a_quote_is_attributed_to_the_author_of_its_source_text(tmp_path, qid, source, author, kind, needle):
    text, lines = (("The quick brown fox jumps over the lazy dog.", [12, 12]) if source == "guide" else
                   ("The guide says to recieve each batch and then check that the loss at init is near log of "
                    "the classes.", [14, 14]))
    extra = {"author": author} if author else {}
    kb_dir = make_kb(tmp_path, [q(qid, text, lines, source=source, **extra)], extra_sources=[("notes", RETELLING)])
    result, found, _ = kinds(kb_dir)
    assert result == {qid: kind}, {k: str(v) for k, v in found.items()}
    if needle:
        assert needle in found[qid].message and found[qid].line == 2, str(found[qid])


def _record_hash(path):
    from kb_tools.core.load import body_sha256
    data = path.read_bytes()
    body_line = data.split(b"\n").index(b"---", 1) + 2
    path.write_bytes(data.replace(b"coverage: excerpt\n", b"coverage: excerpt\nsha256: "
                                  + body_sha256(data, body_line).encode() + b"\n", 1))


def test_a_cache_whose_body_changed_since_capture_is_reported(tmp_path, capsys):
    kb_dir = make_kb(tmp_path, [q("ok", "The quick brown fox jumps over the lazy dog.", [13, 13])])
    guide = tmp_path / "evidence" / "guide.md"
    _record_hash(guide)
    assert cli.main(["verify", "--kb", str(kb_dir)]) == 0
    assert "1 source hashes checked" in capsys.readouterr().out
    data = guide.read_bytes()
    at = data.index(b"lazy")
    guide.write_bytes(data[:at] + b"L" + data[at + 1:])   # one byte, and the quote still verifies
    assert cli.main(["verify", "--kb", str(kb_dir), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] == report["quotes"] == 1 and report["sources_hashed"] == 1
    (defect,) = report["defects"]
    assert (defect["kind"], defect["path"], defect["quote"], defect["line"]) == (
        "cache-changed", "evidence/guide.md", "guide", 9)
    assert "changed since it was captured" in defect["message"] and "kb evidence rehash guide" in defect["message"]
    assert "https://example.org/guide" in defect["message"]   # where to restore it from
    guide.write_bytes(data)
    assert cli.main(["verify", "--kb", str(kb_dir)]) == 0


def test_a_changed_source_is_counted_apart_from_the_quotes(tmp_path, capsys):
    """The summary's quote counts add up to the number of quotes: a source whose hash fails is no
    failed quote (its quotes still verify), it is counted under the source hashes."""
    kb_dir = make_kb(tmp_path, [q("ok", "The quick brown fox jumps over the lazy dog.", [13, 13]),
                                q("bad", "The quick brown fox jumps over the lazy dog.", [12, 12])])
    guide = tmp_path / "evidence" / "guide.md"
    _record_hash(guide)
    data = guide.read_bytes()
    at = data.index(b"lazy")
    guide.write_bytes(data[:at] + b"L" + data[at + 1:])
    assert cli.main(["verify", "--kb", str(kb_dir)]) == 1
    summary = capsys.readouterr().out.splitlines()[-1]
    assert summary.startswith("2 quotes: 1 verbatim, 1 failed, 0 unchecked; 1 source hashes checked, 1 changed"), summary
    assert cli.main(["verify", "--kb", str(kb_dir), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] + report["failed"] + report["unchecked"] == report["quotes"] == 2, report
    assert (report["failed"], report["sources_hashed"], report["sources_changed"], len(report["defects"])) == (1, 1, 1, 2)


def test_front_matter_edits_do_not_change_the_body_hash(tmp_path):
    kb_dir = make_kb(tmp_path, [q("ok", "The quick brown fox jumps over the lazy dog.", [13, 13])])
    guide = tmp_path / "evidence" / "guide.md"
    _record_hash(guide)
    guide.write_text(guide.read_text().replace("title: A field guide", "title: A field guide, second edition"))
    assert not verify_kb(load_kb(str(kb_dir), use_cache=False)).defects


@pytest.mark.parametrize("text, lines, kind, needle", [
    # the source's own misspelling, marked [sic], is verbatim; silently corrected, it is a changed word
    ("The guide says to recieve [sic] each batch and then check that the loss at init is near log of the "
     "classes.", [14, 14], None, None),
    ("The guide says to receive each batch and then check that the loss at init is near log of the classes.",
     [14, 14], "words-changed", "swapped 'recieve' -> 'receive'"),
    # editorial insertions: added words, or standing in for a few of the source's
    ("The guide [on training] says to recieve [sic] each batch and then check that the loss at init is near "
     "log of the classes.", [14, 14], None, None),
    ("[The author] says to recieve [sic] each batch [...] the loss at init is near log of the classes.",
     [14, 14], None, None),
    ("The guide says to recieve [sic] each batch and then check that [the value] at init is near log of the classes.",
     [14, 14], None, None),
    ("The guide says to recieve [sic] each batch [and to verify] near log of the classes.", [14, 14],
     "words-changed", "stands in for 9 source words"),
    ("The guide says to recieve [sic] the loss at init is near log of the classes.", [14, 14],
     "words-changed", "('each batch and then check that')"),
])
def test_sic_and_editorial_brackets_pass_silent_fixes_do_not(tmp_path, text, lines, kind, needle):
    kb_dir = make_kb(tmp_path, [q("one", text, lines, source="notes")], extra_sources=[("notes", RETELLING)])
    result, found, _ = kinds(kb_dir)
    assert result == {"one": kind}, {k: str(v) for k, v in found.items()}
    if needle:
        assert needle in found["one"].message, str(found["one"])


# ---------------------------------------------------------------- CLI contract

def test_cli_json_report_and_exit_codes(tmp_path, capsys):
    kb_dir = make_kb(tmp_path, [q("ok", "The quick brown fox jumps over the lazy dog.", [12, 12]),
                                q("bad", "The quick brown fox jumps over the lazy dog.", [13, 13])])
    assert cli.main(["verify", "--kb", str(kb_dir), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["quotes"] == 2 and report["passed"] == 1 and report["failed"] == 1
    (defect,) = report["defects"]
    assert defect["kind"] == "wrong-lines" and defect["quote"] == "bad" and defect["found"] == [12, 12]
    assert defect["path"] == "kb/quotes/guide.yaml" and defect["line"] == 10


def test_cli_usage_error_exits_2(tmp_path, capsys):
    assert cli.main(["verify", "--no-such-flag"]) == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_broken_quote_file_fails_verify(tmp_path, capsys):
    kb_dir = make_kb(tmp_path, [q("ok", "The quick brown fox jumps over the lazy dog.", [12, 12])])
    (kb_dir / "quotes" / "more.yaml").write_text("quotes:\n  - id: [unclosed\n")
    assert cli.main(["--kb", str(kb_dir), "verify"]) == 1
    assert "KB001" in capsys.readouterr().out


def test_normalisation_keeps_lines_and_reduces_markup():
    text = "See :class:`~torch.nn.LogSoftmax` and\n:meth:`self.train(False) <torch.nn.Module.train>` [x](http://a.b)"
    out = normalise(text)
    assert out.count("\n") == text.count("\n")
    words = [t[0] for part in quote_parts(out) for t in part]
    assert words == ["see", "logsoftmax", "and", "self.train", "(", "false", ")", "x"]


def test_malformed_quote_fields_are_reported_not_crashed(tmp_path):
    quotes = [{"id": "num", "source": "guide", "lines": [12, 12], "text": 42, "themes": ["demo"]},
              {"id": "nolines", "source": "guide", "text": "The quick brown fox jumps over the lazy dog.",
               "themes": ["demo"]}]
    result, found, _ = kinds(make_kb(tmp_path, quotes))
    assert result == {"num": "not-found", "nolines": "wrong-lines"}
    assert "no valid `lines`" in found["nolines"].message and found["nolines"].found == [12, 12]
