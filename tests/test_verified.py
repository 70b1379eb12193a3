"""The record of verified snippet runs (kb/verified/) and the loss curves drawn from it.

The end-to-end test runs the real snippet suite under two xdist workers on a small KB
with one failing snippet: every run lands in results.json, the failure as a failure,
an earlier GPU record survives, and the training snippet's curves are written.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from kb_tools import cli
from kb_tools.site import build as site
from kb_tools.snippets import runner as snippets
from kb_tools.snippets import verified
from kb_tools.core.load import load_kb
from kbfactory import entry, make_kb, write_entry

HERE = os.path.dirname(os.path.abspath(__file__))
# The suite run inside a test: without the plugins these runs never use (hypothesis, anyio), whose
# import cost each of its processes about a second of CPU.
INNER_PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                "-p", "no:anyio"]
SHA = "a" * 64
GPU = "NVIDIA A100-SXM4-80GB"

TRAINS = """\
import torch
torch.manual_seed(0)
def train(lr):
    w = torch.zeros(1, requires_grad=True)
    losses = []
    for _ in range(150):
        loss = ((3.0 - w) ** 2).sum()
        losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            w -= lr * w.grad
            w.grad.zero_()
    return losses
bug_losses = train(0.0)   # the planted bug: no update
fix_losses = train(0.1)
assert fix_losses[-1] < 1e-3 < bug_losses[-1]
print("bug stays at", bug_losses[-1], "fix reaches", fix_losses[-1])
"""


def run(outcome="passed", sha=SHA, day="2026-11-20"):
    return {"outcome": outcome, "date": f"{day}T09:30:00Z", "torch": "2.13.0+cpu", "python": "3.11.2",
            "snippet_sha256": sha}


def test_merging_keeps_other_devices_and_other_entries(tmp_path):
    verified.record({("a", GPU): run(), ("b", "cpu"): run()}, str(tmp_path))
    verified.record({("a", "cpu"): run(day="2026-11-21")}, str(tmp_path))
    data = verified.load_results(str(tmp_path / "results.json"))
    assert set(data) == {"a", "b"} and set(data["a"]) == {"cpu", GPU}
    assert data["a"][GPU]["date"].startswith("2026-11-20") and data["a"]["cpu"]["date"].startswith("2026-11-21")


def test_a_failure_is_recorded_and_keeps_the_last_pass(tmp_path):
    verified.record({("a", "cpu"): run(day="2026-11-19")}, str(tmp_path))
    verified.record({("a", "cpu"): run("failed", day="2026-11-20")}, str(tmp_path))
    verified.record({("a", "cpu"): run("failed", day="2026-11-21")}, str(tmp_path))
    rec = verified.load_results(str(tmp_path / "results.json"))["a"]["cpu"]
    assert rec["outcome"] == "failed" and rec["date"].startswith("2026-11-21")
    assert rec["last_passed"]["date"].startswith("2026-11-19")
    st = verified.status("a", SHA, {"a": {"cpu": rec}})
    assert st["kind"] == "failure" and any("last passed on 2026-11-19" in line for line in st["lines"])


@pytest.mark.parametrize("runs, kind", [
    ({"a": {"cpu": run()}}, "success"),
    ({"a": {"cpu": run(), GPU: run("failed")}}, "failure"),
    ({"a": {"cpu": run(sha="b" * 64)}}, "warning"),
    ({"a": {"cpu": run("failed", sha="b" * 64)}}, "danger"),
    ({"b": {"cpu": run()}}, "danger"),
    (None, "danger"),
])
def test_status_follows_the_record_for_the_current_snippet_text(runs, kind):
    assert verified.status("a", SHA, runs)["kind"] == kind


def test_the_title_names_each_devices_torch_when_they_differ():
    gpu_run = dict(run(), torch="2.11.0+cu130")
    same = verified.status("a", SHA, {"a": {"cpu": run(), GPU: run()}})["title"]
    assert same == f"Passed on cpu, {GPU} with torch {run()['torch']}"
    mixed = verified.status("a", SHA, {"a": {"cpu": run(), GPU: gpu_run}})["title"]
    assert mixed == f"Passed on cpu with torch {run()['torch']}; {GPU} with torch 2.11.0+cu130"


def test_a_distributed_snippet_run_only_on_cpu_says_nccl_was_not_run():
    """A torchrun snippet's CPU run used gloo: its badge must not read as a NCCL proof."""
    cpu_only = verified.status("a", SHA, {"a": {"cpu": run(day="2026-11-21")}}, distributed=True)
    assert cpu_only["title"] == f"Passed on cpu with torch {run()['torch']} (gloo on CPU; NCCL not run)"
    assert cpu_only["date"] == "2026-11-21"
    with_gpu = verified.status("a", SHA, {"a": {"cpu": run(), GPU: run()}}, distributed=True)
    assert "NCCL not run" not in with_gpu["title"]
    assert "NCCL" not in verified.status("a", SHA, {"a": {"cpu": run()}})["title"]  # a single-process snippet


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["entries"]["a"]["cpu"].update(outcome="skipped"), "entries.a.cpu.outcome"),
    (lambda d: d["entries"]["a"]["cpu"].update(snippet_sha256="xyz"), "entries.a.cpu.snippet_sha256"),
    (lambda d: d["entries"]["a"]["cpu"].pop("torch"), "entries.a.cpu.torch"),
    (lambda d: d["entries"]["a"]["cpu"].update(last_passed={"date": 3}), "entries.a.cpu.last_passed.date"),
])
def test_a_malformed_record_is_one_line_naming_file_and_field(tmp_path, capsys, mutate, field):
    kb_dir = make_kb(tmp_path)
    data = {"format": 1, "entries": {"a": {"cpu": run()}}}
    mutate(data)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    code = cli.main(["--kb", str(kb_dir), "build", "--out", str(tmp_path / "out"), "--work",
                     str(tmp_path / "work"), "--results", str(path)])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and str(path) in err and field in err, err


def test_thinning_keeps_spikes_and_nan_within_the_limit():
    values = [1.0] * 1000
    values[537] = 50.0
    values[800] = float("nan")
    points = verified.thin(values)
    assert len(points) <= verified.MAX_POINTS
    assert (537, 50.0) in points and (800, None) in points
    assert [s for s, _ in points] == sorted(s for s, _ in points)
    assert verified.thin([1, 2, float("inf")]) == [(0, 1.0), (1, 2.0), (2, None)]


def test_the_svg_has_both_curves_a_log_axis_and_escapes_its_label():
    curves = {"bug": [[0, 1000.0], [1, None], [2, 900.0], [3, 950.0]],
              "fix": [[0, 1000.0], [1, 10.0], [2, 0.1], [3, 0.01]]}
    text = verified.svg(curves, "x<script>")
    root = ET.fromstring(text)  # well-formed XML, so nothing from the id became markup
    ns = "{http://www.w3.org/2000/svg}"
    assert root.get("role") == "img" and "<script>" not in text
    assert "x<script>" in root.find(f"{ns}title").text and "log scale" in root.find(f"{ns}title").text
    lines = {p.get("class"): p for p in root.iter(f"{ns}polyline")}
    assert set(lines) == {"kb-curve kb-bug", "kb-curve kb-fix"}
    assert len(lines["kb-curve kb-fix"].get("points").split()) == 4
    assert [t.text for t in root.iter(f"{ns}text") if "kb-gap" in (t.get("class") or "")] == ["×"]
    ticks = [t.text for t in root.iter(f"{ns}text") if t.get("class") == "kb-tick" and t.get("text-anchor") == "end"]
    assert ticks == ["0.01", "0.1", "1", "10", "100", "1e+03"]


def test_a_linear_axis_when_the_losses_span_less_than_two_decades():
    text = verified.svg({"bug": [[0, 2.0], [9, 2.0]], "fix": [[0, 2.0], [9, 0.5]]}, "e")
    assert "log scale" not in text and "loss (log)" not in text


def test_keep_globals_brings_back_the_loss_lists_without_changing_the_output(tmp_path):
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("trains-a-bit", snippet=TRAINS))
    e = load_kb(str(kb_dir), use_cache=False).entries["trains-a-bit"]
    plain = snippets.run_snippet(e, "cpu")
    kept = snippets.run_snippet(e, "cpu", keep_globals=verified.CURVE_NAMES)
    assert plain.passed and kept.passed and plain.stdout == kept.stdout and plain.kept == {}
    assert len(kept.kept["bug_losses"]) == 150 and kept.kept["fix_losses"][-1] < 1e-3
    curves = verified.curves_from(kept.kept)
    assert len(curves["bug"]) <= verified.MAX_POINTS and curves["fix"][0] == [0, 9.0]


def test_the_suite_under_two_workers_records_every_run(tmp_path):
    """Two xdist workers, a passing training snippet, a failing one and an earlier GPU record."""
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("trains-a-bit", snippet=TRAINS))
    write_entry(tmp_path, entry("fails-here", snippet="import torch\nassert torch.tensor(1.0) == 2.0\n"))
    kb = load_kb(str(kb_dir), use_cache=False)
    assert not kb.problems
    vdir = verified.record_dir(str(kb_dir))
    assert vdir == str(tmp_path / "build" / "verified")  # beside the KB, never inside it
    verified.record({("alpha-bug", GPU): run()}, vdir)
    env = {**os.environ, "KB_PATH": str(kb_dir)}
    proc = subprocess.run([*INNER_PYTEST, "-n", "2",
                           os.path.join(HERE, "test_snippets.py")], cwd=os.path.dirname(HERE), env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:]  # the failing snippet fails the run
    data = verified.load_results(os.path.join(vdir, "results.json"))
    for eid, e in kb.entries.items():
        rec = data[eid]["cpu"]
        assert rec["snippet_sha256"] == verified.snippet_sha256(e.snippet)
        assert rec["outcome"] == ("failed" if eid == "fails-here" else "passed"), eid
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rec["date"])
    assert data["alpha-bug"][GPU] == run()  # another machine's record is kept
    assert verified.status("fails-here", verified.snippet_sha256(kb.entries["fails-here"].snippet), data)["kind"] == "failure"
    curves = verified.load_curves(vdir, "trains-a-bit")
    assert curves["snippet_sha256"] == verified.snippet_sha256(kb.entries["trains-a-bit"].snippet)
    assert curves["bug"][-1][1] == pytest.approx(9.0) and curves["fix"][-1][1] < 1e-3
    assert not os.path.exists(os.path.join(vdir, "curves", "fails-here.json"))
    assert len(curves["fix"]) <= verified.MAX_POINTS and curves["fix"][-1][0] == 149
    assert not os.path.exists(verified.default_dir(str(kb_dir)))  # the committed record is untouched


def test_a_snippet_test_run_leaves_the_checkout_as_it_was(tmp_path, monkeypatch):
    """The real KB's snippet test records into build/verified (ignored by git), not kb/verified:
    `git status --porcelain` is the same before and after, and the record is where it says."""
    from treeguard import CHECKOUT, git_status
    before = git_status()
    if before is None:
        pytest.skip("not a git checkout")
    env = {k: v for k, v in os.environ.items() if k not in ("KB_PATH", verified.RECORD_VAR)}
    started = time.time()
    proc = subprocess.run([*INNER_PYTEST, os.path.join(HERE, "test_snippets.py"), "-k", "dead-relu and cpu"],
                          cwd=CHECKOUT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert git_status() == before
    record = os.path.join(CHECKOUT, "build", "verified")
    data = verified.load_results(os.path.join(record, verified.RESULTS_FILE))
    assert data["dead-relu"]["cpu"]["outcome"] == "passed"
    assert os.path.getmtime(os.path.join(record, "curves", "dead-relu.json")) >= started - 1
    # conftest.py writes where record_dir() says (the run above); with KB_RECORD_DIR, what `make
    # record` sets, that is the folder named
    monkeypatch.setenv(verified.RECORD_VAR, str(tmp_path / "record"))
    assert verified.record_dir(os.path.join(CHECKOUT, "kb")) == str(tmp_path / "record")


def test_the_suite_fails_when_a_test_changes_the_checkout(tmp_path):
    """conftest's guard, run in a throw-away repository with this suite's conftest.py: a test that
    rewrites a tracked file fails the run, naming the file; the same suite without it passes."""
    import shutil
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    for name in ("conftest.py", "treeguard.py"):
        shutil.copy(os.path.join(HERE, name), repo / "tests" / name)
    (repo / "data.txt").write_text("tracked\n")
    (repo / "tests" / "test_probe.py").write_text(
        "import os\n"
        "def test_reads():\n"
        "    assert open(os.path.join(os.path.dirname(__file__), '..', 'data.txt')).read() == 'tracked\\n'\n"
        "def test_rewrites():\n"
        "    if os.environ.get('REWRITE'):\n"
        "        with open(os.path.join(os.path.dirname(__file__), '..', 'data.txt'), 'a') as fh:\n"
        "            fh.write('changed by a test\\n')\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "probe"]):
        subprocess.run(git + cmd, cwd=repo, check=True, capture_output=True)
    base = [*INNER_PYTEST, "tests"]
    env = {k: v for k, v in os.environ.items() if k != verified.RECORD_VAR}
    clean = subprocess.run(base, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert clean.returncode == 0, clean.stdout[-2000:]
    dirty = subprocess.run(base, cwd=repo, env={**env, "REWRITE": "1"}, capture_output=True, text=True, timeout=300)
    assert dirty.returncode == 1, dirty.stdout[-2000:]
    assert "the test run changed the checkout" in dirty.stdout and "data.txt" in dirty.stdout


def test_the_shipped_record_is_valid_and_names_known_entries():
    kb = load_kb(use_cache=False)
    path = site.default_results(kb)
    data = verified.load_results(path)
    assert data, f"{path}: no verified runs recorded; run pytest -n 2 tests/test_snippets.py and commit it"
    assert set(data) <= set(kb.entries)


def test_a_loss_that_explodes_gets_few_log_labels_and_a_legend_for_its_gaps():
    text = verified.svg({"bug": [[0, 0.5], [1, 1e17], [2, None]], "fix": [[0, 0.5], [2, 0.2]]}, "e")
    root = ET.fromstring(text)
    ns = "{http://www.w3.org/2000/svg}"
    ticks = [t.text for t in root.iter(f"{ns}text") if t.get("class") == "kb-tick" and t.get("text-anchor") == "end"]
    assert 3 <= len(ticks) <= 6 and ticks[0] == "0.1", ticks
    assert any(t.text == "× loss NaN or inf" for t in root.iter(f"{ns}text"))
    assert "× loss" not in verified.svg({"bug": [[0, 1.0], [1, 2.0]], "fix": [[0, 1.0], [1, 0.5]]}, "e")


@pytest.mark.parametrize("bug, field", [([[0, float("nan")]], "bug"), ([[0, 1.0]] * 101, "bug"), ([], "bug")])
def test_a_malformed_curves_file_names_file_and_field(tmp_path, bug, field):
    path = tmp_path / "curves" / "x.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"bug": bug, "fix": [[0, 1.0]]}))
    with pytest.raises(verified.VerifiedError) as err:
        verified.load_curves(str(tmp_path), "x")
    assert str(err.value).startswith(f"{path}: {field}:"), err.value
