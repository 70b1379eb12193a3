"""`kb search --from-watch REPORT` and `kb context --from-watch REPORT`: a report that `kb watch`
wrote becomes the entries behind its findings, for people and for agents, without torch; a file
that is not such a report is one line on stderr and exit 1."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUG = os.path.join("tests", "watch", "cases", "double-softmax", "bug_softmax_in_forward.py")
FIXED = os.path.join("tests", "watch", "cases", "double-softmax", "fixed_softmax_in_forward.py")
pytestmark = pytest.mark.xdist_group("watch-readers")  # one worker watches the two scripts, once


def kb(*argv, stdin=None, timeout=300):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "kb_tools", *argv], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """The reports of a watched bug script and of its fixed twin, as kb watch --report writes them:
    watched in this process (as `kb watch -- python SCRIPT` runs a script when the python named is
    the one running kb), so torch is imported once, not in two more interpreters; the readers below
    run as commands."""
    pytest.importorskip("torch")
    from watchrun import kb_watch
    folder = tmp_path_factory.mktemp("watch-reports")
    out = {}
    for name, script in (("bug", BUG), ("fixed", FIXED)):
        path = folder / f"{name}.json"
        code, _, stderr = kb_watch("--steps", "20", "--report", str(path), "--", sys.executable, script)
        assert code == (1 if name == "bug" else 0), stderr
        out[name] = path
    return out


def test_search_from_watch_names_the_entry_with_what_was_measured(reports):
    r = kb("search", "--from-watch", str(reports["bug"]))
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.split()[1] == "double-softmax", r.stdout
    assert "found: KBW007 double-softmax: cross_entropy got probabilities" in r.stdout
    hits = json.loads(kb("search", "--from-watch", str(reports["bug"]), "--json").stdout)
    assert hits[0]["id"] == "double-softmax" and hits[0]["score"] >= 1 and hits[0]["matched"].startswith("KBW007")
    assert set(hits[0]) >= {"id", "title", "area", "score", "matched", "low_confidence"}


def test_a_clean_report_says_nothing_was_found(reports):
    r = kb("search", "--from-watch", str(reports["fixed"]))
    assert r.returncode == 0 and r.stdout.startswith("kb watch found nothing in that run"), r.stdout
    assert json.loads(kb("search", "--from-watch", str(reports["fixed"]), "--json").stdout) == []


def test_search_from_watch_reads_standard_input_and_imports_no_torch(reports):
    probe = ("import sys, runpy\nsys.argv = ['kb', 'search', '--from-watch', '-', '--json']\n"
             "from kb_tools.cli import main\ncode = main()\n"
             "assert 'torch' not in sys.modules, 'torch imported'\nsys.exit(code)")
    r = subprocess.run([sys.executable, "-c", probe], input=reports["bug"].read_text(), capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["id"] == "double-softmax"


def test_context_from_watch_is_markdown_with_the_measurement_and_the_fix(reports):
    r = kb("context", "--from-watch", str(reports["bug"]))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# kb context for what kb watch found in:")
    assert "## double-softmax:" in r.stdout and "Measured in this run: KBW007" in r.stdout and "Fix:" in r.stdout
    data = json.loads(kb("context", "--from-watch", str(reports["bug"]), "--json", "--budget", "150").stdout)
    assert data["entries"][0]["id"] == "double-softmax" and data["tokens"] <= 150
    clean = kb("context", "--from-watch", str(reports["fixed"]))
    assert clean.returncode == 0 and "found none of the KB's mistakes" in clean.stdout


@pytest.mark.parametrize("content, message", [
    (None, "cannot read the watch report"),
    ("not json {", "not a kb watch report (not JSON"),
    ('{"version": 1}', "no 'findings' list"),
    ('{"version": 99, "findings": []}', "a watch report of version 99"),
    ('{"version": 1, "findings": [{"code": "KBW001"}]}', "findings[0]: needs the strings"),
])
@pytest.mark.parametrize("command", ["search", "context"])
def test_a_file_that_is_not_a_report_is_one_line_and_exit_1(tmp_path, content, message, command):
    path = tmp_path / "report.json"
    if content is not None:
        path.write_text(content)
    r = kb(command, "--from-watch", str(path))
    assert r.returncode == 1 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and message in r.stderr and str(path) in r.stderr, r.stderr


@pytest.mark.parametrize("argv, message", [
    (["search", "loss flat", "--from-watch", "r.json"], "not both"),
    (["search", "--from-lint", "x.py", "--from-watch", "r.json"], "not both"),
    (["context", "loss flat", "--from-watch", "r.json"], "not both"),
    (["context"], "empty query"),
])
def test_a_query_and_a_report_together_are_a_usage_error(argv, message):
    r = kb(*argv)
    assert r.returncode == 2 and message in r.stderr and r.stderr.count("\n") == 1, r.stderr
