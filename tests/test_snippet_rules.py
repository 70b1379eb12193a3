"""Entries agree with their own snippets: figures and snippet rules.

The CPU snippet test (test_snippets.py) fails when an entry's text restates a
figure its snippet no longer prints; these tests prove that check can fail, and
keep every snippet runnable as `kb snippet ID | python` with torch alone.
"""
from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from kb_tools.snippets import runner as snippets
from kb_tools.core.load import load_kb
from kbfactory import shipped_entry_ids, entry, make_kb

PRINTS_58 = "import torch\nprint('figure dead_units: 58%')\nprint('58% of units dead')\n"


def load_entry(tmp_path, **fields):
    make_kb(tmp_path, entries=[entry("figure-case", **fields)])
    kb = load_kb(str(tmp_path / "kb"), use_cache=False)
    return kb, kb.entries.get("figure-case")


def test_figure_that_prose_and_snippet_agree_on_passes(tmp_path):
    _, e = load_entry(tmp_path, caveats="In the snippet 58% of units die.", figures={"dead_units": "58%"},
                      snippet=PRINTS_58)
    run = snippets.run_snippet(e, "cpu", timeout=120)
    assert run.passed, run.stderr
    assert snippets.figure_problems(e, run.stdout) == []


def test_text_restating_a_figure_the_snippet_no_longer_prints_fails(tmp_path):
    # The snippet changed (52% now), the text still says 58%: the CPU snippet test must fail.
    _, e = load_entry(tmp_path, caveats="In the snippet 58% of units die.", figures={"dead_units": "58%"},
                      snippet=PRINTS_58.replace("58%", "52%"))
    run = snippets.run_snippet(e, "cpu", timeout=120)
    assert run.passed, run.stderr
    problems = snippets.figure_problems(e, run.stdout)
    assert problems == ["figure dead_units: the text says '58%' but the snippet printed '52%'"]


def test_figure_missing_from_text_or_output_fails():
    e = type("E", (), {"figures": {"dead_units": "58%"}, "title": "t", "symptoms": ["158% and 58.5%"],
                       "cause": "", "fix": "", "check": "", "caveats": "", "correction": None,
                       "snippet_note": None, "evidence_note": None})()
    problems = snippets.figure_problems(e, "figure other: 3x\n")
    assert problems == [
        "figure dead_units: the entry lists '58%' but its text never states it",
        "figure dead_units: the snippet printed no `figure dead_units: ...` line",
        "figure other: printed by the snippet as '3x' but not listed in `figures`",
    ]


def test_a_figure_is_found_only_as_a_whole_number():
    assert snippets.states("about 58% die", "58%")
    assert not snippets.states("about 158% die", "58%")
    assert not snippets.states("loss 0.445", "0.44") and snippets.states("loss 0.44.", "0.44")


@pytest.mark.parametrize("figures, message", [
    ({"Dead-Units": "58%"}, "'Dead-Units' is not a snake_case figure name"),
    ({"dead_units": 0.58}, "'dead_units' must be one line of quoted text"),
    (["dead_units"], "must map figure names to values"),
])
def test_malformed_figures_are_a_one_line_kb004(tmp_path, figures, message):
    kb, _ = load_entry(tmp_path, figures=figures)
    found = [str(p) for p in kb.problems if p.field == "figures"]
    assert len(found) == 1 and "KB004" in found[0] and message in found[0], found


# ---------------------------------------------------------------- snippet rules for every entry

STDLIB = set(sys.stdlib_module_names)


@pytest.mark.parametrize("eid", shipped_entry_ids())
def test_snippet_imports_torch_and_stdlib_only_and_runs_from_stdin(shipped_kb, eid):
    """CONTRIBUTING's rule: torch and the standard library only (no numpy, which torch does
    not require), and nothing that needs the program to be a file: `kb snippet ID | python`
    has no source to read back (`inspect.getsource`) and no `__file__`."""
    tree = ast.parse(shipped_kb.entries[eid].snippet)
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        for name in names:
            top = name.split(".")[0]
            assert top == "torch" or top in STDLIB, f"{eid}: imports {name}"
            assert top != "inspect", f"{eid}: imports inspect (getsource fails on stdin)"
        if isinstance(node, ast.Name):
            assert node.id != "__file__", f"{eid}: uses __file__ (undefined on stdin)"
        if isinstance(node, ast.Attribute):
            assert node.attr not in ("numpy", "getsource"), f"{eid}: calls .{node.attr}() (needs numpy or a file)"


@pytest.mark.parametrize("eid", ["stale-preprocessing-cache", "distributed-sampler-set-epoch"])
def test_snippet_runs_piped_into_python(eid):
    text = subprocess.run([sys.executable, "-m", "kb_tools", "snippet", eid], capture_output=True,
                          text=True, check=True).stdout
    proc = subprocess.run([sys.executable, "-"], input=text, capture_output=True, text=True, timeout=120,
                          env=snippets.child_env("cpu"))
    assert proc.returncode == 0, proc.stderr[-2000:]
