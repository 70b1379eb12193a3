"""bench/watch_quality.py counts what its three corpora hold (checked here on a tiny corpus built in a
temporary folder), and every healthy look-alike of tests/watch/lookalikes/<entry>/ gets no finding.

A look-alike is a correct script shaped like one of the bugs (a frozen backbone left out of the
optimizer, gradient accumulation with zero_grad every K steps, log_softmax then nll_loss, ...):
it has no bug twin, so it lives outside tests/watch/cases, whose folders hold bug/fixed pairs."""
from __future__ import annotations

import glob
import hashlib
import importlib.util
import os
import shutil

import pytest
import yaml

pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = os.path.join(ROOT, "tests", "watch", "cases")
LOOKALIKES = os.path.join(ROOT, "tests", "watch", "lookalikes")
BUG = os.path.join(CASES, "lr-too-low", "bug_lr_typo.py")      # KBW014 lr-too-low within 20 steps
FIXED = os.path.join(CASES, "lr-too-low", "fixed_lr_typo.py")  # no finding


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("watch_quality", os.path.join(ROOT, "bench", "watch_quality.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def _sha(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def test_cases_section_counts_first_and_any_finding_and_flags_on_healthy_scripts(bench, tmp_path):
    cases, lookalikes = tmp_path / "cases", tmp_path / "lookalikes"
    for name, source in [("bug_typo.py", BUG), ("fixed_typo.py", FIXED), ("bug_silent.py", FIXED),
                         ("fixed_silent.py", BUG)]:
        _write(str(cases / "lr-too-low" / name), open(source).read())
    _write(str(lookalikes / "lr-too-low" / "healthy.py"), open(FIXED).read())
    _write(str(lookalikes / "lr-too-low" / "flagged.py"), open(BUG).read())
    section = bench.case_section(str(cases), str(lookalikes), steps=20)
    assert section["per_entry"]["lr-too-low"] == {"bugs": 2, "first": 1, "any": 1, "fixed": 2, "fixed_flagged": 1,
                                                  "fixed_findings": 1, "lookalikes": 2, "lookalikes_flagged": 1}
    rows = {os.path.basename(r["script"]): r for r in section["rows"]}
    assert rows["bug_typo.py"]["findings"] == ["KBW014 lr-too-low"] and rows["bug_typo.py"]["first"]
    assert rows["bug_silent.py"]["findings"] == [] and not rows["bug_silent.py"]["any"]
    assert rows["flagged.py"]["kind"] == "lookalike" and rows["healthy.py"]["findings"] == []
    lines = bench.case_table(section, markdown=True)
    assert lines[0].startswith("| entry |") and "| lr-too-low | 2 | 1/2 (50%) | 1/2 (50%) | 1/2 | 1/2 |" in lines


def test_real_section_runs_restored_scripts_in_a_child_and_counts_false_alarms(bench, tmp_path):
    real = tmp_path / "real"
    os.makedirs(real)
    shutil.copy(BUG, real / "flagged.py")
    shutil.copy(FIXED, real / "healthy.py")
    shutil.copy(FIXED, real / "edited.py")
    manifest = [
        {"file": "flagged.py", "argv": [], "steps": 20,
         "judged": [{"code": "KBW014", "entry": "lr-too-low", "verdict": False, "why": "test"}]},
        {"file": "healthy.py", "sha256": _sha(real / "healthy.py"), "steps": 20},
        {"file": "edited.py", "sha256": "0" * 64},
        {"file": "not_restored.py"},
    ]
    _write(str(real / "MANIFEST.yaml"), yaml.safe_dump(manifest))
    section = bench.real_section(str(real), timeout=300)
    assert section["listed"] == 4 and section["ran"] == 2
    assert section["missing"] == ["not_restored.py"] and section["changed"] == ["edited.py"]
    rows = {r["file"]: r for r in section["rows"]}
    assert rows["flagged.py"]["findings"] == ["KBW014 lr-too-low"] and rows["flagged.py"]["steps"] == 20
    assert rows["flagged.py"]["judged_false"] == 1 and rows["flagged.py"]["false_alarms"] == 1
    assert rows["healthy.py"]["findings"] == [] and rows["healthy.py"]["error"] is None
    assert section["false_alarms"] == 1 and section["false_alarms_per_script"] == 0.5
    assert section["scripts_with_false_alarm"] == 1 and section["errors"] == 0


def test_real_section_a_finding_judged_true_is_no_false_alarm_and_an_unjudged_one_is(bench, tmp_path):
    real = tmp_path / "real"
    for name in ("a.py", "b.py"):
        _write(str(real / name), "pass\n")
    _write(str(real / "c" / "main.py"), "pass\n")
    manifest = [{"file": "a.py", "argv": ["--data", "tests/watch/real/standins/data", "--epochs", 1],
                 "judged": [{"code": "KBW001", "entry": "params-not-in-optimizer", "verdict": True, "why": "test"}]},
                {"file": "b.py"},
                {"file": "c/main.py", "support": [{"file": "c/model.py", "path": "model.py", "sha256": "0" * 64}]}]
    _write(str(real / "MANIFEST.yaml"), yaml.safe_dump(manifest))
    report = {"findings": [{"code": "KBW001", "entry": "params-not-in-optimizer", "step": 3},
                           {"code": "KBW012", "entry": "train-eval-mode", "step": 9}],
              "run": {"steps": 20, "error": None, "exit_status": 0, "internal_errors": []}}
    calls = []
    section = bench.real_section(str(real), run=lambda path, steps, argv: calls.append(argv) or report, root="/repo")
    assert calls[0] == ["--data", "/repo/tests/watch/real/standins/data", "--epochs", "1"] and calls[1] == []
    assert section["missing"] == ["c/main.py"]  # its support module is not restored
    rows = {r["file"]: r for r in section["rows"]}
    assert (rows["a.py"]["judged_true"], rows["a.py"]["false_alarms"], rows["a.py"]["unjudged"]) == (1, 1, 1)
    assert (rows["b.py"]["judged_true"], rows["b.py"]["false_alarms"], rows["b.py"]["unjudged"]) == (0, 2, 2)
    assert section["false_alarms"] == 3 and section["judged_true"] == 1
    assert bench.real_section(str(tmp_path / "nothing")) is None


def test_bug_section_reports_dev_and_test_apart(bench, tmp_path):
    bugs = tmp_path / "bugs"
    _write(str(bugs / "dev" / "typo.py"), open(BUG).read())
    _write(str(bugs / "test" / "typo_fixed.py"), open(FIXED).read())
    manifest = [
        {"file": "dev/typo.py", "url": "https://example.org/1", "thread_title": "t", "confirmed_cause": "c",
         "entry": "lr-too-low", "split": "dev", "shape": "s"},
        {"file": "test/typo_fixed.py", "url": "https://example.org/2", "thread_title": "t", "confirmed_cause": "c",
         "entry": "lr-too-low", "split": "test", "shape": "s", "frozen_since": "2026-01-01"},
        {"file": "test/gone.py", "entry": "nan-loss", "split": "test"},
    ]
    _write(str(bugs / "MANIFEST.yaml"), yaml.safe_dump(manifest))
    section = bench.bug_section(str(bugs), steps=20)
    assert section["splits"] == {"dev": {"scripts": 1, "found": 1, "first": 1},
                                 "test": {"scripts": 1, "found": 0, "first": 0}}
    assert section["missing"] == ["test/gone.py"]
    lines = bench.bug_table(section, markdown=False)
    assert lines[1].split() == ["dev", "1", "1/1", "(100%)", "1/1", "(100%)"]
    only_dev = bench.bug_section(str(bugs), steps=20, split="dev")
    assert [r["file"] for r in only_dev["rows"]] == ["dev/typo.py"] and only_dev["missing"] == []
    batch = bench.bug_section(str(bugs), steps=20, files=["test/typo_fixed.py"])   # one batch's first run
    assert [r["file"] for r in batch["rows"]] == ["test/typo_fixed.py"] and batch["splits"]["test"]["found"] == 0
    with pytest.raises(SystemExit, match="not in the manifest for --split dev: test/typo_fixed.py"):
        bench.bug_section(str(bugs), steps=20, split="dev", files=["test/typo_fixed.py"])
    assert bench.bug_section(str(tmp_path / "nothing")) is None


def lookalikes():
    return [pytest.param(p, id=os.path.relpath(p, LOOKALIKES)[:-3])
            for p in sorted(glob.glob(os.path.join(LOOKALIKES, "*", "*.py")))]


@pytest.mark.parametrize("path", lookalikes())
def test_a_healthy_lookalike_gets_no_finding(bench, path):
    from kb_tools.core.load import load_kb
    assert os.path.basename(os.path.dirname(path)) in load_kb(os.path.join(ROOT, "kb")).entries
    report = bench.watch_in_process(os.path.relpath(path, ROOT), bench.CASE_STEPS)
    assert report["findings"] == [], report["findings"]
    run = report["run"]
    ran = run["steps"] or run["backward_calls"]  # optimizer steps, or backward() calls of a loop updating by hand
    assert run["exit_status"] == 0 and not run["error"] and ran > 0 and run["internal_errors"] == []


def test_steps_zero_watches_the_whole_run(bench, tmp_path):
    script = tmp_path / "short.py"
    _write(str(script), "import torch\nw = torch.nn.Parameter(torch.ones(3))\nopt = torch.optim.SGD([w], lr=0.1)\n"
                        "for _ in range(7):\n    opt.zero_grad()\n    (w ** 2).sum().backward()\n    opt.step()\n")
    whole = bench.watch_in_process(str(script), 0)
    assert whole["run"]["steps"] == 7 and whole["run"]["error"] is None
    assert bench.watch_in_process(str(script), 3)["run"]["steps"] == 3
