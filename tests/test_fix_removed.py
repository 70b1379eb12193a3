"""Each snippet must fail when its fix is taken out: proof that its asserts can fail.

`tests/fix_removed/<id>.yaml` records, for an entry, the edits that turn the
fixed half of its snippet back into the bug. The edited snippet is run on CPU
exactly as the snippet test runs it, and must stop on an AssertionError: a
snippet that still passes with its fix removed asserts nothing about the fix.
"""
from __future__ import annotations

import copy
import os

import pytest
import yaml

from kb_tools.snippets import runner as snippets
from kb_tools.core.load import load_kb

HERE = os.path.join(os.path.dirname(__file__), "fix_removed")
FILES = sorted(f for f in os.listdir(HERE) if f.endswith(".yaml")) if os.path.isdir(HERE) else []


def read_record(name: str) -> dict:
    with open(os.path.join(HERE, name), encoding="utf-8") as fh:
        record = yaml.safe_load(fh)
    assert isinstance(record, dict) and record.get("id") == name[:-5], f"{name}: `id` must be the file stem"
    assert isinstance(record.get("why"), str) and record["why"].strip(), f"{name}: `why` says what the edit undoes"
    edits = record.get("edits")
    assert isinstance(edits, list) and edits, f"{name}: `edits` is a non-empty list of {{old, new}}"
    return record


def remove_fix(snippet: str, edits: list, name: str) -> str:
    """Apply each edit once; an `old` text that is absent or ambiguous is an error, not a no-op."""
    for i, edit in enumerate(edits):
        old, new = edit.get("old"), edit.get("new")
        assert isinstance(old, str) and isinstance(new, str) and old != new, f"{name}: edit {i} needs distinct `old` and `new`"
        count = snippet.count(old)
        assert count == 1, f"{name}: edit {i}: `old` occurs {count} times in the snippet, must be exactly once"
        snippet = snippet.replace(old, new)
    return snippet


@pytest.fixture(scope="module")
def kb():
    loaded = load_kb(use_cache=False)
    assert not loaded.problems, "\n".join(map(str, loaded.problems))
    return loaded


@pytest.mark.parametrize("name", FILES, ids=[f[:-5] for f in FILES])
def test_snippet_fails_without_its_fix(kb, name):
    pytest.importorskip("torch")
    record = read_record(name)
    entry = kb.entries.get(record["id"])
    assert entry is not None, f"{name}: no entry {record['id']!r}"
    broken = copy.copy(entry)
    broken.snippet = remove_fix(entry.snippet, record["edits"], name)
    run = snippets.run_snippet(broken, "cpu")
    assert not run.timed_out, f"{name}: the snippet without its fix timed out"
    assert run.returncode != 0, f"{name}: the snippet still passes with its fix removed:\n{run.stdout[-1500:]}"
    assert "AssertionError" in (run.stderr or ""), \
        f"{name}: the snippet failed without its fix, but not on an assert:\n{(run.stderr or '')[-1500:]}"


def test_every_record_names_an_entry(kb):
    for name in FILES:
        assert read_record(name)["id"] in kb.entries, name
