"""The reference blocks of README.md and CONTRIBUTING.md are what the code says, and every example of a
command's output is what that command prints on this checkout (see kb_tools/docs.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from kb_tools import docs
from kb_tools.core.load import load_kb
from kb_tools.core.util import KBError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# One worker runs these (`make test` uses --dist loadgroup): the README's examples are run once per
# process (docs.example_blocks caches them), about half a minute, so a second worker would pay again.
pytestmark = pytest.mark.xdist_group("docs")


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
    from kb_tools.core.load import ENTRY_FIELDS
    from kb_tools.core.model import CODES
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


def test_the_script_check_mode_exits_1_on_drift_and_names_only_the_drift(tmp_path, kb, monkeypatch, capsys):
    """The script, run on a copy of the checkout with one table row changed: exit 1, and that row is
    the whole diff, so every other block came out the same there. Its README examples are the ones
    this process already ran on the checkout (test_generated_blocks_are_current proves them current,
    and a clone at another path in CI proves they do not depend on where the checkout is): running
    them again in the copy would cost ten seconds of CPU or more and prove nothing more."""
    import runpy
    outputs = {".git", ".venv", "site", "build", "artifacts", "node_modules"}  # the checkout's own, at its top

    def skipped(folder, names):
        if os.path.abspath(folder) == ROOT:
            return [n for n in names if n in outputs]
        if os.path.basename(folder) == "tests":  # the queries for `kb eval`, the folders WHERE_TO_ADD names
            return [n for n in names if n not in ("queries.yaml", "fix_removed", "lint", "watch")]
        return [n for n in names if n == "__pycache__"]
    shutil.copytree(ROOT, tmp_path / "repo", ignore=skipped)
    readme = tmp_path / "repo" / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8").replace("| `KB105` |", "| `KB999` |"), encoding="utf-8")
    examples = docs.example_blocks(kb)
    monkeypatch.setattr(docs, "example_blocks", lambda copied_kb: examples)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts its checkout first
    script = runpy.run_path(str(tmp_path / "repo" / "scripts" / "generate_docs.py"), run_name="generate_docs")
    assert script["ROOT"] == str(tmp_path / "repo")
    code = script["main"](["--check"])
    out, err = capsys.readouterr()
    assert code == 1 and "README.md out of date" in err
    changed = [line for line in out.splitlines() if line[:1] in ("+", "-") and line[:3] not in ("+++", "---")]
    assert [line[:12] for line in changed] == ["-| `KB999` |", "+| `KB105` |"], out
    assert readme.read_text(encoding="utf-8").count("| `KB999` |") == 1  # --check writes nothing


def block_of(text: str, name: str) -> str:
    start = text.index(docs.BEGIN.format(name))
    return text[start:text.index(docs.END.format(name), start)]


def test_every_example_block_is_in_the_readme_and_is_the_commands_output(kb):
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    generated = docs.blocks(kb)
    for name, examples in docs.EXAMPLES.items():
        block = block_of(readme, name)
        for example in examples:
            assert f"$ {example.command}" in block
    search = block_of(readme, "example-search")
    capture = subprocess.run([sys.executable, "-m", "kb_tools", "--kb", os.path.join(ROOT, "kb"), "search",
                              "loss flat", "-n", "3"], capture_output=True, text=True, cwd=ROOT,
                             env={**os.environ, "NO_COLOR": "1"})
    assert capture.stdout.rstrip("\n") in search  # the ranking, scores and order as the command prints them
    assert generated["example-search"] in readme


def test_a_stale_example_output_fails_the_check_and_write_mode_repairs_it(tmp_path, kb):
    for name in docs.DOC_FILES:
        shutil.copy(os.path.join(ROOT, name), tmp_path / name)
    readme = tmp_path / "README.md"
    text = readme.read_text(encoding="utf-8")
    eval_block = block_of(text, "example-eval")
    figures = next(line for line in eval_block.splitlines() if line.endswith(tuple("0123456789")) and "hit@1" in line)
    stale = text.replace(figures, figures.replace("hit@1 0.", "hit@1 1."), 1)
    readme.write_text(stale, encoding="utf-8")
    ((name, diff),) = docs.update_docs(str(tmp_path), kb, check=True)
    assert name == "README.md" and f"+{figures}" in diff and "hit@1 1." in diff
    assert readme.read_text(encoding="utf-8") == stale  # --check writes nothing
    docs.update_docs(str(tmp_path), kb)
    assert readme.read_text(encoding="utf-8") == text


@pytest.mark.parametrize("example, message", [
    (docs.Example("kb show no-such-entry"), "`kb show no-such-entry` exited with status 1 (expected 0): "
                                             "kb: unknown entry 'no-such-entry'"),
    (docs.Example("kb check", status=1, edit=("kb/tags.yaml", "no such text in the file", "x")),
     "kb/tags.yaml no longer holds 'no such text in the file'"),
    (docs.Example("python -c 1"), "an example runs a kb command"),
])
def test_an_example_that_no_longer_runs_as_shown_is_a_one_line_error(example, message):
    with pytest.raises(KBError) as caught:
        docs.run_example(example, ROOT)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_where_to_add_names_only_paths_that_exist(monkeypatch):
    """CONTRIBUTING's "where to add" table is generated with every path checked: a folder that is
    moved or renamed stops the generation (and so fails the docs check) instead of going stale."""
    assert "kb_tools/lint/rules/" in docs.where_to_add()
    monkeypatch.setattr(docs, "WHERE_TO_ADD", docs.WHERE_TO_ADD + (("a thing", [("kb_tools/nowhere/", "x")]),))
    with pytest.raises(KBError, match="kb_tools/nowhere/"):
        docs.where_to_add()
