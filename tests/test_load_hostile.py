"""The loader under hostile and careless input: every mistake is one reported problem with file and
line, never a traceback, a hang or a value that breaks the commands after it."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
import yaml

from kb_tools.core.load import MAX_FILE_BYTES, load_kb
from kbfactory import entry, make_kb, write_entry, write_source

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def found(kb_dir):
    return [str(p) for p in load_kb(str(kb_dir), use_cache=False).problems]


def load_within(kb_dir, seconds=20):
    """load_kb in a thread that must finish: a FIFO or a device must not hang the loader."""
    out = {}
    worker = threading.Thread(target=lambda: out.update(kb=load_kb(str(kb_dir), use_cache=False)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "the loader hung"
    return out["kb"]


def kb_cli(*args, cache):
    env = {**os.environ, "KB_CACHE_DIR": str(cache)}
    env.pop("KB_PATH", None)
    return subprocess.run([sys.executable, "-m", "kb_tools", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=60)


def test_duplicate_keys_are_reported_with_both_lines(tmp_path):
    kb_dir = make_kb(tmp_path)
    text = yaml.safe_dump(entry("dupe-key"), sort_keys=False)
    write_entry(tmp_path, entry("dupe-key"), raw=text + "title: A second title\n")
    problems = [p for p in found(kb_dir) if "dupe-key" in p]
    assert len(problems) == 1 and "KB001" in problems[0] and "duplicate key 'title' (first on line 2)" in problems[0]


def test_duplicate_keys_in_front_matter_and_quotes(tmp_path):
    kb_dir = make_kb(tmp_path)
    (tmp_path / "evidence" / "twice.md").write_text("---\ntitle: a\ntitle: b\n---\nbody\n")
    (tmp_path / "kb" / "quotes" / "twice.yaml").write_text(
        "quotes:\n  - id: q-two\n    text: line one\n    text: line two\n")
    problems = found(kb_dir)
    assert any(p.startswith("evidence/twice.md") and "duplicate key 'title'" in p for p in problems), problems
    assert any(p.startswith("kb/quotes/twice.yaml:4: KB001") and "duplicate key 'text'" in p for p in problems), problems


@pytest.mark.parametrize("overrides, message", [
    ({"aliases": ["alias-self"]}, "KB012 aliases: alias 'alias-self' is this entry's own id"),
    ({"aliases": ["O99", "o99"]}, "KB012 aliases: alias 'o99' is listed twice"),
    ({"see_also": ["alias-self"]}, "KB010 see_also: 'alias-self' is this entry itself"),
])
def test_aliases_and_see_also_that_point_at_the_entry_itself(tmp_path, overrides, message):
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("alias-self", **overrides))
    problems = found(kb_dir)
    assert len(problems) == 1 and message in problems[0], problems


@pytest.mark.parametrize("field, value", [
    ("title", "2020-01-01"), ("cause", "2020-01-01"), ("tags", "[2020-01-01]"),
    ("title", "[1, 2]"), ("fix", "{a: b}"), ("area", "[loss]"), ("symptoms", "[1, 2, 3]"),
    ("title", "[" * 5000 + "]" * 5000),
])
def test_non_text_fields_are_reported_and_every_command_still_works(tmp_path, field, value):
    kb_dir = make_kb(tmp_path)
    data = entry("odd-field")
    data.pop(field)
    write_entry(tmp_path, data, raw=yaml.safe_dump(data, sort_keys=False) + f"{field}: {value}\n")
    assert any("odd-field" in p and ("KB004" in p or "KB008" in p or "KB001" in p) for p in found(kb_dir))
    for args in (["search", "loss flat"], ["check"], ["show", "alpha-bug"], ["list"]):
        r = kb_cli("--kb", str(kb_dir), *args, cache=tmp_path / "cache")
        assert "Traceback" not in r.stderr and r.returncode == 1, (args, r.stderr)
        assert "odd-field" in r.stdout + r.stderr


def test_a_date_in_quote_themes_does_not_break_the_cache(tmp_path):
    kb_dir = make_kb(tmp_path)
    (tmp_path / "kb" / "quotes" / "dated.yaml").write_text(
        "quotes:\n  - id: q-dated\n    source: src\n    lines: [9, 9]\n    text: line one\n    themes: [2020-01-01]\n")
    r = kb_cli("--kb", str(kb_dir), "check", cache=tmp_path / "cache")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "kb/quotes/dated.yaml:6: KB004 themes" in r.stdout


@pytest.mark.parametrize("lines, message", [
    ("[true, 27]", "must be [first, last]"),
    ("[9, 400]", "goes past the end of evidence for 'src' (11 lines)"),
])
def test_quote_lines_must_be_numbers_inside_the_file(tmp_path, lines, message):
    kb_dir = make_kb(tmp_path)
    (tmp_path / "kb" / "quotes" / "more.yaml").write_text(
        f"quotes:\n  - id: q-two\n    source: src\n    lines: {lines}\n    text: line one\n    themes: [x]\n")
    problems = found(kb_dir)
    assert len(problems) == 1 and "KB015 lines" in problems[0] and message in problems[0], problems


def test_symlink_loops_links_to_root_and_dangling_links_are_reported(tmp_path):
    kb_dir = make_kb(tmp_path)
    entries = tmp_path / "kb" / "entries"
    (entries / "loss" / "loop").symlink_to(entries)  # a folder loop
    (entries / "root").symlink_to("/")
    (entries / "loss" / "self.yaml").symlink_to(entries / "loss" / "self.yaml")
    (entries / "loss" / "gone.yaml").symlink_to(tmp_path / "nowhere.yaml")
    kb = load_within(kb_dir)
    problems = [str(p) for p in kb.problems]
    assert sorted(kb.entries) == ["alpha-bug", "beta-bug"]
    assert any("entries/loss/loop" in p and "symlinked folder" in p for p in problems), problems
    assert any("entries/root" in p and "symlinked folder" in p for p in problems), problems
    assert any("self.yaml" in p and ("not a regular file" in p or "symbolic links" in p) for p in problems), problems
    assert any("gone.yaml" in p and "not a regular file" in p for p in problems), problems


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every folder")
def test_an_unreadable_folder_is_reported(tmp_path):
    kb_dir = make_kb(tmp_path)
    locked = tmp_path / "kb" / "entries" / "data"
    locked.mkdir()
    locked.chmod(0)
    try:
        assert any("entries/data" in p and "cannot read the folder" in p for p in found(kb_dir))
    finally:
        locked.chmod(0o755)


def test_an_unreadable_folder_is_reported_even_as_root(tmp_path, monkeypatch):
    kb_dir = make_kb(tmp_path)
    (tmp_path / "kb" / "entries" / "data").mkdir()
    real = os.scandir

    def scandir(path):
        if str(path).endswith(os.path.join("entries", "data")):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    problems = found(kb_dir)
    assert any("entries/data" in p and "cannot read the folder: Permission denied" in p for p in problems), problems


def test_fifos_and_devices_in_entries_and_evidence_do_not_hang(tmp_path):
    kb_dir = make_kb(tmp_path)
    os.mkfifo(tmp_path / "kb" / "entries" / "loss" / "pipe.yaml")
    os.mkfifo(tmp_path / "evidence" / "pipe.md")
    (tmp_path / "evidence" / "zero.md").symlink_to("/dev/zero")
    (tmp_path / "kb" / "quotes" / "zero.yaml").symlink_to("/dev/zero")
    kb = load_within(kb_dir)
    problems = [str(p) for p in kb.problems]
    for name in ("pipe.yaml", "pipe.md", "zero.md", "zero.yaml"):
        assert any(name in p and "not a regular file" in p for p in problems), (name, problems)
    assert sorted(kb.entries) == ["alpha-bug", "beta-bug"]


def test_files_and_fields_over_the_caps_are_reported_not_indexed(tmp_path):
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("huge-symptom", symptoms=["loss flat " * 1000, "b", "c"]))
    write_entry(tmp_path, entry("huge-file"), raw=yaml.safe_dump(entry("huge-file")) + "#" * MAX_FILE_BYTES + "\n")
    write_source(tmp_path, "huge-source", body="word " * (MAX_FILE_BYTES // 5 + 10))
    kb = load_within(kb_dir)
    problems = [str(p) for p in kb.problems]
    assert any("huge-symptom" in p and "KB004 symptoms: has an item over 2000 characters" in p for p in problems)
    assert any("huge-file.yaml" in p and "file too large" in p for p in problems), problems
    assert any("huge-source.md" in p and "file too large" in p for p in problems), problems
    assert kb.entries["huge-symptom"].symptoms == [] and "huge-source" not in kb.sources


def test_a_non_utf8_file_is_one_problem(tmp_path):
    kb_dir = make_kb(tmp_path)
    (tmp_path / "kb" / "entries" / "loss").mkdir(parents=True, exist_ok=True)
    (tmp_path / "kb" / "entries" / "loss" / "latin.yaml").write_bytes(b"title: caf\xe9\n")
    problems = [p for p in found(kb_dir) if "latin" in p]
    assert problems == ["kb/entries/loss/latin.yaml: KB001 cannot read: not UTF-8 text (invalid continuation byte at byte 10)"]


HIDDEN = ["\u202e", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u202a", "\u202d", "\u2066", "\u2069"]


@pytest.mark.parametrize("char", HIDDEN, ids=[f"U+{ord(c):04X}" for c in HIDDEN])
def test_an_invisible_or_reordering_character_in_a_title_is_one_problem(tmp_path, char):
    """A right-to-left override or a zero-width character makes a title read as another one (or hides
    words from search); `kb check` names the file, the field and the character."""
    kb_dir = make_kb(tmp_path)
    path = write_entry(tmp_path, entry("gamma-bug", title=f"Loss goes {char}nan"))
    problems = found(kb_dir)
    assert len(problems) == 1 and problems[0].startswith(f"{os.path.relpath(path, tmp_path)}:2: KB027 title: ") \
        and f"U+{ord(char):04X}" in problems[0], problems


def test_an_invisible_character_in_a_symptom_names_its_line(tmp_path):
    kb_dir = make_kb(tmp_path)
    path = write_entry(tmp_path, entry("gamma-bug", symptoms=["one symptom", "two\u200b symptom", "three symptom"]))
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "two" in text)
    problems = found(kb_dir)
    assert len(problems) == 1 and f":{line}: KB027 symptoms: " in problems[0] and "U+200B" in problems[0], problems
