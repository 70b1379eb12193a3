"""The reference blocks of README.md and CONTRIBUTING.md are what the code says (see kb_tools/docs.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from kb_tools import docs
from kb_tools.load import load_kb
from kb_tools.util import KBError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def kb():
    return load_kb(os.path.join(ROOT, "kb"), use_cache=False)


def test_generated_blocks_are_current(kb):
    stale = docs.update_docs(ROOT, kb, check=True)
    assert stale == [], "run `python scripts/generate_docs.py`:\n" + "\n".join(d for _, d in stale)


def test_check_mode_reports_a_drifted_table_and_write_mode_repairs_it(tmp_path, kb):
    for name in docs.DOC_FILES:
        shutil.copy(os.path.join(ROOT, name), tmp_path / name)
    contributing = tmp_path / "CONTRIBUTING.md"
    text = contributing.read_text(encoding="utf-8")
    drifted = text.replace("| `aliases` | list of str | yes (may be empty) |", "| `aliases` | list of str | no |")
    assert drifted != text
    contributing.write_text(drifted, encoding="utf-8")
    ((name, diff),) = docs.update_docs(str(tmp_path), kb, check=True)
    assert name == "CONTRIBUTING.md" and "-| `aliases` | list of str | no |" in diff
    assert contributing.read_text(encoding="utf-8") == drifted  # --check writes nothing
    docs.update_docs(str(tmp_path), kb)
    assert contributing.read_text(encoding="utf-8") == text


def test_every_code_and_field_appears_in_the_generated_docs(kb):
    from kb_tools.load import ENTRY_FIELDS
    from kb_tools.model import CODES
    text = "".join(open(os.path.join(ROOT, n), encoding="utf-8").read() for n in docs.DOC_FILES)
    assert [c for c in CODES if f"| `{c}` |" not in text] == []
    assert [f for f in ENTRY_FIELDS if f"| `{f}` |" not in text] == []


@pytest.mark.parametrize("text, message", [
    ("a\n<!-- begin generated: no-such-block -->\nb\n", "unknown generated block 'no-such-block'"),
    ("a\n<!-- begin generated: check-codes -->\nno end\n", "has no `<!-- end generated: check-codes -->`"),
])
def test_a_broken_marker_is_a_one_line_error(text, message, kb):
    with pytest.raises(KBError, match=message):
        docs.fill(text, docs.blocks(kb), "README.md")


def test_the_script_check_mode_exits_1_on_drift_and_0_when_current(tmp_path):
    shutil.copytree(ROOT, tmp_path / "repo", ignore=shutil.ignore_patterns(
        ".git", ".venv", "site", "build", "artifacts", "node_modules", "__pycache__", "tests"))
    script = [sys.executable, str(tmp_path / "repo" / "scripts" / "generate_docs.py"), "--check"]
    assert subprocess.run(script, capture_output=True).returncode == 0
    readme = tmp_path / "repo" / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8").replace("| `KB105` |", "| `KB999` |"), encoding="utf-8")
    run = subprocess.run(script, capture_output=True, text=True)
    assert run.returncode == 1 and "README.md out of date" in run.stderr and "+| `KB105` |" in run.stdout
