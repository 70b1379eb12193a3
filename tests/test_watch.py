"""`kb watch`: each check names its entry on its bug script and stays silent on the fixed twin, and
the command behaves as a command: stops cleanly after --steps, exits 0/1/2, writes JSON and
reports, runs torchrun ranks, leaves torch as it found it, and keeps its memory bounded.

The bug/fixed pairs live in tests/watch/cases/<entry>/bug_<shape>.py and fixed_<shape>.py; they
run in this process (as `kb watch --steps 50 --json -- python CASE` does when the python named is
the one running kb), once for the whole module."""
from __future__ import annotations

import ast
import gc
import glob
import io
import json
import math
import os
import subprocess
import textwrap
import sys

import pytest

torch = pytest.importorskip("torch")

from kb_tools import cli  # noqa: E402
from watchrun import kb_watch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = os.path.join(ROOT, "tests", "watch", "cases")
SCRIPTS = os.path.join(ROOT, "tests", "watch", "scripts")
STEPS = 50


@pytest.fixture
def one_thread():
    """torch on one thread, as the case runs: on a shared 2-core machine a second thread only waits."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def kb_subprocess(*argv, cwd=ROOT, env=None, timeout=300):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "kb_tools", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def case_pairs():
    pairs = []
    for bug in sorted(glob.glob(os.path.join(CASES, "*", "bug_*.py"))):
        fixed = os.path.join(os.path.dirname(bug), "fixed_" + os.path.basename(bug)[len("bug_"):])
        pairs.append(pytest.param(bug, fixed, id=os.path.relpath(bug, CASES)[:-3]))
    return pairs


# The tests that read case_reports run on one pytest-xdist worker (`--dist loadgroup`, as `make test`
# runs): every worker that ran one of them would run all the case scripts again.
CASES_GROUP = pytest.mark.xdist_group("watch-cases")


@pytest.fixture(scope="session")
def case_reports():
    """Every case script's `kb watch --steps 50 --json` report, run once: {path: (code, report, stderr)}.
    Session-scoped: a module fixture is torn down whenever the worker turns to another module and
    set up again (all the case scripts again) when it comes back."""
    reports = {}
    for path in sorted(glob.glob(os.path.join(CASES, "*", "*.py"))):
        code, out, err = kb_watch("--steps", str(STEPS), "--json", "--", sys.executable, os.path.relpath(path, ROOT))
        reports[path] = (code, json.loads(out), err)
    return reports


# ---------------------------------------------------------------- the checks and their cases

def test_every_check_points_to_an_existing_entry_and_states_its_criterion():
    from kb_tools.core.load import load_kb
    from kb_tools.watch.checks import all_checks
    kb = load_kb(os.path.join(ROOT, "kb"))
    checks = all_checks()
    assert len(checks) >= 10
    for check in checks:
        for entry in (check.entry, *check.also):
            assert entry in kb.entries, f"{check.code} points to '{entry}', which is no entry"
        doc = " ".join((check.__doc__ or "").split())
        assert "Criterion" in doc and any(c.isdigit() for c in doc), f"{check.code}: state the numeric criterion"
        assert check.title and 0 < check.confidence <= 1
    assert len({c.code for c in checks}) == len(checks)


def test_every_case_folder_is_an_entry_and_every_bug_has_its_fixed_twin():
    from kb_tools.core.load import load_kb
    kb = load_kb(os.path.join(ROOT, "kb"))
    for folder in os.listdir(CASES):
        assert folder in kb.entries, folder
        bugs = {f[len("bug_"):] for f in os.listdir(os.path.join(CASES, folder)) if f.startswith("bug_")}
        fixes = {f[len("fixed_"):] for f in os.listdir(os.path.join(CASES, folder)) if f.startswith("fixed_")}
        assert bugs and bugs == fixes, (folder, bugs ^ fixes)


def test_every_entry_a_check_names_has_at_least_two_bug_pairs():
    """One shape proves little: each entry a check reports has two bug/fixed pairs written differently."""
    from kb_tools.watch.checks import all_checks
    named = {e for c in all_checks() for e in (c.entry, *c.also)}
    pairs = {e: sum(f.startswith("bug_") for f in os.listdir(os.path.join(CASES, e)))
             for e in named if os.path.isdir(os.path.join(CASES, e))}
    assert {e: n for e, n in pairs.items() if n < 2} == {}
    assert named - set(pairs) <= {"rank-divergent-data"}, named - set(pairs)  # needs ranks: the torchrun test


@CASES_GROUP
@pytest.mark.parametrize("bug, fixed", case_pairs())
def test_the_bug_gets_its_entry_first_and_the_fixed_twin_gets_nothing(case_reports, bug, fixed):
    entry = os.path.basename(os.path.dirname(bug))
    code, report, err = case_reports[bug]
    found = [(f["code"], f["entry"]) for f in report["findings"]]
    assert found and found[0][1] == entry, (found, err[-2000:])
    assert code == 1
    first = report["findings"][0]
    assert first["message"] and first["evidence"] and first["step"] is not None
    assert report["run"]["internal_errors"] == [], report["run"]["internal_errors"]
    code, report, err = case_reports[fixed]
    assert report["findings"] == [], report["findings"]
    assert code == 0 and report["run"]["exit_status"] == 0 and not report["run"]["error"], err[-2000:]
    # it ran: optimizer steps, or backward() calls for a loop that updates by hand
    assert (report["run"]["steps"] or report["run"]["backward_calls"]) > 0 and report["run"]["internal_errors"] == []


@CASES_GROUP
def test_every_check_is_the_first_finding_of_some_bug_case(case_reports):
    from kb_tools.watch.checks import all_checks
    firsts = {report["findings"][0]["code"] for path, (_, report, _) in case_reports.items()
              if os.path.basename(path).startswith("bug_") and report["findings"]}
    # a check that needs several ranks compared is proven by the torchrun test below instead
    assert {c.code for c in all_checks() if not getattr(c, "cross_rank", False)} <= firsts


@CASES_GROUP
def test_a_finding_names_what_was_measured_where(case_reports):
    _, report, _ = case_reports[os.path.join(CASES, "params-not-in-optimizer", "bug_head_replaced.py")]
    finding = report["findings"][0]
    assert finding["code"] == "KBW001" and finding["entry"] == "params-not-in-optimizer"
    assert finding["message"].startswith("2 parameters (head.weight, head.bias) got gradients for 50 steps "
                                         "but never changed; not in any optimizer (optimizer created at ")
    assert finding["where"] == "tests/watch/cases/params-not-in-optimizer/bug_head_replaced.py:20"
    assert finding["evidence"]["parameters"] == ["head.weight", "head.bias"]
    run = report["run"]
    assert run["steps"] == STEPS and run["stopped_after_steps"] == STEPS and run["sampled_steps"] == 14
    assert [o["site"] for o in run["optimizers"]] == [finding["where"]]
    assert run["models"][0]["class"] == "Net" and run["losses"][0]["module"] == "CrossEntropyLoss"


@CASES_GROUP
def test_a_crashing_bug_is_reported_with_the_users_traceback(case_reports):
    code, report, err = case_reports[os.path.join(CASES, "bce-with-logits", "bug_logits_into_bceloss.py")]
    assert code == 1 and report["run"]["exit_status"] == 1
    assert report["run"]["error"].startswith("RuntimeError: all elements of input should be between 0 and 1")
    assert report["findings"][0]["code"] == "KBW010"
    assert "Traceback (most recent call last)" in err and "multilabel_loss" in err
    assert "kb_tools" not in err.split("Traceback (most recent call last)", 1)[1]


# ---------------------------------------------------------------- the command

@pytest.mark.parametrize("argv, message", [
    ([], "name the training command after --"),
    (["--"], "name the training command after --"),
    (["--", "python"], "name the script to run"),
    (["--", sys.executable, "no/such/train.py"], "no/such/train.py: no such file"),
    (["--", sys.executable, "tests"], "tests: not a file"),
    (["--bogus", "--", sys.executable, "x.py"], "unrecognized arguments: --bogus"),
    (["--steps", "0", "--", sys.executable, "x.py"], "--steps must be at least 1"),
    (["--steps", "ten", "--", sys.executable, "x.py"], "invalid int value"),
    (["--no-evaluation-pass", "--", sys.executable, "x.py"], "--no-evaluation-pass changes how --steps N stops"),
    (["--every", "0", "--", sys.executable, "x.py"], "--every must be at least 1"),
    (["--", sys.executable, "-c", "print(1)"], "python -c is not supported"),
    (["--", "bash", "train.sh"], "cannot watch `bash`"),
    (["--", "python-that-does-not-exist", "x.py"], "python-that-does-not-exist: command not found"),
])
def test_a_users_mistake_is_one_line_on_stderr_and_exit_2(capsys, argv, message):
    assert cli.main(["watch", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err, err


def test_steps_stops_the_run_and_the_scripts_finally_block_runs(tmp_path):
    marker = tmp_path / "marker.txt"
    code, out, err = kb_watch("--steps", "7", "--json", "--", sys.executable,
                              os.path.join(SCRIPTS, "finally_marker.py"), str(marker))
    report = json.loads(out)
    assert marker.read_text() == "finally ran after 6 steps\n"  # the 7th step() ran, the count after it did not
    assert code == 0 and report["findings"] == [] and report["run"]["steps"] == 7
    assert report["run"]["stopped_after_steps"] == 7 and report["run"]["exit_status"] == 0
    assert "trained" not in out + err and "Traceback" not in err


def test_a_watched_model_can_be_saved_whole_and_deep_copied():
    code, out, err = kb_watch("--json", "--", sys.executable, os.path.join(SCRIPTS, "save_whole_model.py"))
    report = json.loads(out)
    assert report["run"]["exit_status"] == 0 and report["run"]["error"] is None, err
    assert "saved, loaded and copied" in err and report["findings"] == []


@CASES_GROUP
def test_exit_status_0_clean_1_findings_and_the_scripts_own_failure_is_reported(tmp_path, case_reports):
    code, out, _ = kb_watch("--", sys.executable, os.path.join(SCRIPTS, "finally_marker.py"), str(tmp_path / "m"))
    assert code == 0 and out.splitlines()[0] == "trained 200 steps"
    assert out.splitlines()[-1].startswith("kb watch: nothing found in 200 optimizer steps; watched 1 model")
    code, out, _ = kb_watch("--json", "--", sys.executable, os.path.join(SCRIPTS, "finally_marker.py"),
                            str(tmp_path / "m"), "3")
    report = json.loads(out)
    assert code == 1 and report["findings"] == [] and report["run"]["exit_status"] == 3
    code, out, err = kb_watch("--", sys.executable, os.path.join(SCRIPTS, "raises.py"))
    assert code == 1 and "ValueError: corrupt shard 7" in err
    assert err.count("Traceback (most recent call last)") == 1 and "runpy" not in err and "kb_tools" not in err
    assert "raises.py exited with status 1 (ValueError: corrupt shard 7)" in out


@CASES_GROUP
def test_text_output_is_the_finding_its_kb_show_line_and_a_summary(case_reports):
    code, out, _ = kb_watch("--steps", "50", "--", sys.executable,
                            "tests/watch/cases/params-not-in-optimizer/bug_head_replaced.py")
    lines = out.splitlines()  # stopped at step 50 of 60: the script's last print never ran
    assert code == 1 and len(lines) == 3
    assert lines[0] == ("KBW001 params-not-in-optimizer: 2 parameters (head.weight, head.bias) got gradients for "
                        "50 steps but never changed; not in any optimizer (optimizer created at "
                        "tests/watch/cases/params-not-in-optimizer/bug_head_replaced.py:20)")
    assert lines[1] == "  kb show params-not-in-optimizer"
    assert lines[2] == ("kb watch: 1 finding in 50 optimizer steps (stopped after --steps 50; no DataLoader fed the "
                        "steps, so the script's own evaluation was not watched: watch the whole run to check it); "
                        "watched 1 model, 1 optimizer, 1 loss")


@CASES_GROUP
def test_json_is_one_object_with_findings_and_the_runs_facts(case_reports):
    code, out, err = kb_watch("--steps", "100", "--json", "--", sys.executable,
                              "tests/watch/cases/optimizer-step-order/bug_zero_grad_after_backward.py")
    report = json.loads(out)  # stdout holds the JSON only: the script's prints went to stderr
    assert "final loss" in err and "final loss" not in out
    assert set(report) == {"version", "findings", "run", "checks"}
    finding = report["findings"][0]
    assert set(finding) == {"code", "entry", "title", "confidence", "message", "evidence", "where", "step", "rank"}
    assert finding["code"] == "KBW002" and finding["rank"] is None and isinstance(finding["evidence"], dict)
    run = report["run"]
    for key in ("steps", "sampled_steps", "every", "models", "optimizers", "schedulers", "losses", "loaders",
                "exit_status", "stopped_after_steps", "command", "internal_errors"):
        assert key in run, key
    assert run["loaders"][0]["site"].endswith("bug_zero_grad_after_backward.py:35")
    assert run["optimizers"][0]["class"] == "Adam" and run["optimizers"][0]["steps"] == 64 == run["steps"]
    assert run["stopped_after_steps"] is None and run["batches"] == 64


def test_report_file_is_written_atomically_and_holds_the_json(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old report")
    code, out, _ = kb_watch("--steps", "20", "--json", "--report", str(target), "--", sys.executable,
                            "tests/watch/cases/lr-too-low/bug_lr_typo.py")
    assert code == 1 and json.loads(target.read_text()) == json.loads(out)
    assert os.listdir(tmp_path) == ["report.json"]  # no temporary file left beside it
    code, _, err = kb_watch("--steps", "2", "--report", str(tmp_path / "no" / "dir.json"), "--", sys.executable,
                            "tests/watch/cases/lr-too-low/fixed_lr_typo.py")
    assert code == 1 and "cannot write the report" in err and len(err.strip().splitlines()) == 1


def test_list_checks_text_and_json(capsys):
    from kb_tools.watch.checks import all_checks
    assert cli.main(["watch", "--list-checks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(all_checks()) and lines[0].startswith("KBW001  params-not-in-optimizer")
    assert cli.main(["watch", "--list-checks", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["code"] for r in rows] == [c.code for c in all_checks()]
    assert all(set(r) == {"code", "name", "entry", "also", "title", "confidence", "criterion"} for r in rows)


def test_a_script_named_without_python_and_a_module_run_with_dash_m(tmp_path):
    code, out, _ = kb_watch("--steps", "5", "--json", "--", "tests/watch/scripts/finally_marker.py",
                            str(tmp_path / "m"))
    assert code == 0 and json.loads(out)["run"]["steps"] == 5
    package = tmp_path / "proj"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "train.py").write_text(open(os.path.join(CASES, "lr-too-low", "bug_lr_typo.py")).read())
    code, out, err = kb_watch("--steps", "20", "--json", "--", sys.executable, "-m", "proj.train", cwd=tmp_path)
    report = json.loads(out)
    assert code == 1 and report["findings"][0]["entry"] == "lr-too-low", err


def test_another_interpreter_runs_the_script_in_a_child_that_reports_back(tmp_path):
    wrapper = tmp_path / "python-other"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    r = kb_subprocess("watch", "--steps", "30", "--json", "--", str(wrapper),
                      "tests/watch/cases/double-softmax/bug_softmax_in_forward.py")
    report = json.loads(r.stdout)
    assert r.returncode == 1 and report["findings"][0]["code"] == "KBW007", r.stderr[-2000:]
    assert report["run"]["command"][0] == "python-other" and report["run"]["stopped_after_steps"] == 30
    assert report["run"]["steps"] >= 30 and "fast_forward" in report["run"]["evaluation_pass"]


def test_torch_is_left_as_it_was_found():
    import torch.nn.functional as F
    from torch.nn.modules import module as module_hooks
    from torch.optim import optimizer as optimizer_hooks
    before = (F.cross_entropy, torch.autograd.backward, torch.nn.Module.__init__, torch.optim.Optimizer.__init__,
              torch.std, torch.var_mean, torch.Tensor.std, torch.Tensor.var, torch.jit.script,
              torch.utils.checkpoint.checkpoint)
    kb_watch("--steps", "3", "--", sys.executable, "tests/watch/cases/train-eval-mode/bug_train_after_eval.py")
    kb_watch("--", sys.executable, "tests/watch/scripts/raises.py")
    assert (F.cross_entropy, torch.autograd.backward, torch.nn.Module.__init__,
            torch.optim.Optimizer.__init__, torch.std, torch.var_mean, torch.Tensor.std, torch.Tensor.var,
            torch.jit.script, torch.utils.checkpoint.checkpoint) == before
    assert "__call__" not in torch.nn.modules.loss._Loss.__dict__ and "std" not in torch.Tensor.__dict__
    assert not module_hooks._global_forward_hooks and not module_hooks._global_forward_pre_hooks
    assert not optimizer_hooks._global_optimizer_pre_hooks and not optimizer_hooks._global_optimizer_post_hooks
    from kb_tools.watch import hooks
    assert hooks.active_session() is None


# ---------------------------------------------------------------- in code, torchrun, memory, imports

def test_watch_in_code_prints_the_report_at_exit_and_writes_report_file(tmp_path):
    target = tmp_path / "r.json"
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, os.path.join(SCRIPTS, "inline_api.py"), str(target)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "training done" in r.stdout, r.stderr
    assert "KBW001 params-not-in-optimizer: 2 parameters (2.weight, 2.bias) got gradients for 20 steps" in r.stderr
    assert "optimizer passed to watch() at " in r.stderr and "kb show params-not-in-optimizer" in r.stderr
    assert json.loads(target.read_text())["findings"][0]["code"] == "KBW001"


def test_watch_in_code_handle_reports_on_demand_and_stops(one_thread):
    from torch import nn

    from kb_tools.watch import watch
    from kb_tools.watch import hooks
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3), nn.Softmax(dim=1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    stream = io.StringIO()
    handle = watch(model, optimizer, steps=12, stream=stream)
    x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
    for _ in range(20):  # watching stops after 12 steps; training goes on
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    assert [f["code"] for f in handle.findings] == ["KBW007"]
    assert handle.session.step == 12 and handle.report().splitlines()[0].startswith("KBW007 double-softmax:")
    handle.stop()
    handle.stop()  # idempotent: printed once
    assert stream.getvalue().count("KBW007") == 1 and hooks.active_session() is None


@pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                    reason="torch.distributed with gloo is not available")
def test_torchrun_two_cpu_ranks_each_watched_and_merged(tmp_path):
    """One torchrun run: the merged JSON report (--report) and the text printed beside it."""
    path = tmp_path / "report.json"
    argv = ["watch", "--steps", "20", "--report", str(path), "--", "torchrun", "--nproc-per-node", "2", "--standalone",
            "tests/watch/scripts/ddp_head_replaced.py", "--same-data"]
    env = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    for attempt in range(2):  # torch's CPU gloo aborts at interpreter exit in about 1 run of 15
        r = kb_subprocess(*argv, env=env)
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if sorted(report["run"]["ranks"]) == [0, 1]:
            break
    else:
        pytest.fail(r.stderr[-3000:])
    assert r.returncode == 1
    assert sorted(f["rank"] for f in report["findings"] if f["code"] == "KBW001") == [0, 1]
    assert report["run"]["steps"] == 20 and report["run"]["command"][0] == "torchrun"
    assert "[ranks 0, 1]" in r.stdout and r.stdout.count("KBW001") == 1
    (same,) = [f for f in report["findings"] if f["code"] == "KBW036"]
    assert same["entry"] == "rank-divergent-data" and same["rank"] is None
    assert same["evidence"]["steps_identical"] == same["evidence"]["steps_compared"] >= 3


def _rank_report(rank: int, inputs: list) -> dict:
    return {"findings": [], "run": {"rank": rank, "steps": 20, "shared": {"KBW036": {"inputs": inputs, "model_site": "t.py:9"}}}}


@pytest.mark.parametrize("second, found", [
    ([[0, "a"], [1, "b"], [2, "c"], [3, "d"]], True),     # the same input on every step
    ([[0, "a"], [1, "x"], [2, "c"], [3, "d"]], False),    # 3 of 4 alike: under 80%
    ([[0, "w"], [1, "x"], [2, "y"], [3, "z"]], False),    # sharded data
    ([[0, "a"], [1, "b"]], False),                        # too few steps in common
])
def test_the_merge_finds_ranks_that_read_the_same_batches(second, found):
    from kb_tools.watch.report import merge_reports
    first = [[0, "a"], [1, "b"], [2, "c"], [3, "d"]]
    merged = merge_reports([_rank_report(0, first), _rank_report(1, second)])
    assert [f["code"] for f in merged["findings"]] == (["KBW036"] if found else [])
    assert merge_reports([_rank_report(0, first)])["findings"] == []  # one rank alone says nothing


def _footprint(obj, seen=None) -> int:
    """How many items the containers reachable from `obj` hold: its attributes, and those of the
    session's own objects (checks, infos), without going into torch's objects."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, (torch.Tensor, torch.nn.Module, torch.optim.Optimizer)):
        return 0
    seen.add(id(obj))
    if isinstance(obj, dict):
        return len(obj) + sum(_footprint(k, seen) + _footprint(v, seen) for k, v in obj.items())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return len(obj) + sum(_footprint(v, seen) for v in obj)
    if type(obj).__module__.startswith("kb_tools.watch"):
        fields = list(getattr(obj, "__dict__", {}).values())
        fields += [getattr(obj, n) for n in getattr(type(obj), "__slots__", ()) if hasattr(obj, n)]
        return sum(_footprint(v, seen) for v in fields)
    return 0


def _footprints(session) -> dict:
    """_footprint of each check and of each of the session's own attributes: what grew, when one did."""
    parts = {type(c).__name__: _footprint(c, {id(session)}) for c in session.checks}
    parts.update({f"session.{k}": _footprint(v, {id(session)}) for k, v in vars(session).items() if k != "checks"})
    return parts


@pytest.mark.parametrize("form, log1p, found", [
    (lambda d, x: 1 - d, False, True),
    (lambda d, x: 1.0 - d + 1e-8, False, True),
    (lambda d, x: (1 - d).clamp(min=1e-8), False, True),
    (lambda d, x: torch.ones_like(d) - d, False, True),
    (lambda d, x: 1 - d.view(-1), False, True),
    (lambda d, x: -d, True, True),
    (lambda d, x: d, False, False),                       # log D(G(z)): the non-saturating loss
    (lambda d, x: 1 - torch.tanh(x), False, False),       # no sigmoid behind it
    (lambda d, x: d - d.detach() * 0.5, False, False),    # a difference of two tensors, not 1 - D
    (lambda d, x: 1 - d, True, False),                    # log1p(1 - D) is not log(1 - D)
], ids=["one-minus", "eps-added", "clamped", "ones-like", "viewed", "log1p-neg", "log-d", "tanh", "two-terms",
        "log1p-of-complement"])
def test_the_saturating_loss_reads_one_minus_sigmoid_through_constants_clamps_and_views(form, log1p, found):
    from kb_tools.watch.checks.kbw068_saturating_generator_loss import complement_of_sigmoid
    x = torch.randn(6, 1, requires_grad=True)
    d = torch.sigmoid(x)
    got = complement_of_sigmoid(form(d, x), log1p=log1p)
    assert (got is not None) == found
    if found:
        assert torch.equal(got, d.detach())


def test_evaluation_losses_between_sampled_steps_reach_only_the_checks_that_watch_them(one_thread):
    """An evaluation loop that falls on an unsampled step (all of it between two optimizer steps) is
    seen by the checks that set watches_evaluation, for at most EVALUATION_LOSSES calls in the run;
    the other checks see sampled steps only, and a grad-enabled call on an unsampled step is never taken."""
    import torch.nn.functional as F

    from kb_tools.watch.checks import Check
    from kb_tools.watch.session import EVALUATION_LOSSES, Session
    seen = {"evaluation": [], "other": []}

    class Evaluation(Check):
        code, name, entry, watches_evaluation = "KBW998", "evaluation-probe", "nan-loss", True

        def on_loss(self, call):
            seen["evaluation"].append((self.session.step, call.evaluation, call.grad_enabled))

    class Other(Check):
        code, name, entry = "KBW999", "other-probe", "nan-loss"

        def on_loss(self, call):
            seen["other"].append((self.session.step, call.evaluation))

    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    session = Session(checks=[Evaluation, Other], stop_run=False)
    session.add_model(model)
    session.add_optimizer(opt)
    session.install()
    try:
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        for step in range(30):
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step == 14:  # the run is at step 15 now: not sampled (warmup 10, then every 10th)
                F.mse_loss(model(x), y)  # grad enabled, unsampled: never taken
                with torch.no_grad():
                    for _ in range(EVALUATION_LOSSES + 20):
                        F.mse_loss(model(x), y)
    finally:
        session.uninstall()
    taken = [s for s in seen["evaluation"] if s[1]]
    assert len(taken) == EVALUATION_LOSSES and {(step, grad) for step, _, grad in taken} == {(15, False)}
    assert all(not evaluation for _, evaluation in seen["other"])
    assert {step for step, _ in seen["other"]} == {s for s in range(30) if s < 10 or s % 10 == 0}
    assert [s for s in seen["evaluation"] if not s[1]] == [(s, False, True) for s, _ in seen["other"]]


def test_memory_stays_bounded_over_2000_steps(one_thread):
    """Sampling every step (the most the checks ever keep), everything the session and its checks
    hold, and the number of live tensors, are the same after 2,000 steps as after 500."""
    from torch import nn

    from kb_tools.watch import watch
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 100, 0.9)
    x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
    handle = watch(model, optimizer, scheduler, every=1, stream=io.StringIO())

    def live_tensors():
        gc.collect()
        return sum(1 for o in gc.get_objects() if type(o) is torch.Tensor or type(o) is nn.Parameter)
    try:
        for step in range(2000):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            scheduler.step()
            if step == 499:
                held, tensors, parts = _footprint(handle.session), live_tensors(), _footprints(handle.session)
        now = _footprints(handle.session)
        grown = {k: (v, now.get(k)) for k, v in parts.items() if now.get(k) != v}
        assert _footprint(handle.session) == held and live_tensors() <= tensors, grown
    finally:
        handle.stop()
    assert handle.session.step == 2000 and handle.session.sampled_steps >= 2000 and held > 50


def test_the_package_keeps_to_its_imports():
    """kb_tools.watch imports kb_tools.core and itself only; outside it, only the watch command's
    functions import it, and the readers of a report (--from-watch) import its torch-free report module; and `kb watch --help` and the argument errors do not import torch."""
    watch_dir = os.path.join(ROOT, "kb_tools", "watch")
    for path in glob.glob(os.path.join(ROOT, "kb_tools", "**", "*.py"), recursive=True):
        tree = ast.parse(open(path, encoding="utf-8").read())
        inside = path.startswith(watch_dir + os.sep)
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            for name in names:
                if inside and name.startswith("kb_tools"):
                    assert name.startswith(("kb_tools.core", "kb_tools.watch")), (path, name)
        if not inside:
            top_level = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
            assert not any((getattr(n, "module", None) or "").startswith("kb_tools.watch")
                           or any(a.name.startswith("kb_tools.watch") for a in n.names) for n in top_level), path
            if path.endswith(os.path.join("kb_tools", "commands", "watch.py")):
                continue
            text = open(path, encoding="utf-8").read().replace("kb_tools.watch.report import", "")
            assert "kb_tools.watch" not in text, path
    probe = ("import sys, io, contextlib\nfrom kb_tools.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
             "    try:\n        main(['watch', '--help'])\n    except SystemExit as exc:\n        codes = [exc.code]\n"
             "    codes.append(main(['watch', '--', 'python', 'no-such.py']))\n"
             "assert codes == [0, 2] and 'torch' not in sys.modules, (codes, 'torch' in sys.modules)\nprint('clean')")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and "clean" in r.stdout, r.stderr


# One model with an RMS norm (rsqrt in its graph): its gradient made non-finite under a finite loss
# two ways. A distance of exactly 0 under the norm's sqrt: NaN, named nan-grad-at-zero. A finite loss
# scaled so far up that the gradients' norm overflows to inf (an explosion's signature): nan-loss.
NONFINITE_GRAD = """
import sys
import torch
from torch import nn
class RMSNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
    def forward(self, x):
        h = self.fc(x)
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
torch.manual_seed(0)
model = RMSNet()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 8)
for step in range(3):
    out = model(x)
    if sys.argv[1] == "zero-distance":
        loss = (out - out.detach()).pow(2).sum(-1).sqrt().mean()
    else:
        loss = out.pow(2).mean() * 1e37
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("how, entry", [("zero-distance", "nan-grad-at-zero"), ("overflow", "nan-loss")])
def test_a_nan_gradient_under_a_root_names_nan_grad_at_zero_and_an_overflow_does_not(tmp_path, how, entry):
    script = tmp_path / "nonfinite_grad.py"
    script.write_text(NONFINITE_GRAD)
    code, out, err = kb_watch("--json", "--", sys.executable, str(script), how)
    found = [f for f in json.loads(out)["findings"] if f["code"] == "KBW006"]
    assert len(found) == 1 and found[0]["entry"] == entry, (out, err[-500:])
    assert found[0]["evidence"]["grad_nonfinite_with_finite_loss"] is True


# The same two ways, on step 15 only: not a sampled step (the first 10, then every 10th). The
# distance's sqrt runs on every step; only on step 15 is it exactly 0.
NONFINITE_GRAD_AT_STEP_15 = """
import sys
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(30):
    x = torch.randn(16, 8)
    out = model(x)
    target = out.detach() if step == 15 and sys.argv[1] == "zero-distance" else torch.randn(16, 8)
    loss = (out - target).pow(2).sum(-1).sqrt().mean()
    if step == 15 and sys.argv[1] == "overflow":
        loss = loss * 1e38
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("deferred", [False, True], ids=["read-at-once", "device-flag"])
@pytest.mark.parametrize("how, entry, step", [("zero-distance", "nan-grad-at-zero", 15), ("overflow", "nan-loss", None)])
def test_a_nan_gradient_born_between_sampled_steps_is_dated_to_its_step(tmp_path, monkeypatch, how, entry, step,
                                                                        deferred):
    """A NaN gradient under a finite loss on unsampled step 15 is dated there: read at once on the CPU,
    or (as on an accelerator, forced here) from a flag kept on the device and read at step 20; an
    overflow to inf on that step is not a NaN under a finite loss, and stays nan-loss."""
    from kb_tools.watch.checks import kbw006_nonfinite
    if deferred:
        monkeypatch.setattr(kbw006_nonfinite, "_read_at_once", lambda t: False)
    script = tmp_path / "nonfinite_at_15.py"
    script.write_text(NONFINITE_GRAD_AT_STEP_15)
    code, out, err = kb_watch("--json", "--", sys.executable, str(script), how)
    found = [f for f in json.loads(out)["findings"] if f["code"] == "KBW006"]
    assert len(found) == 1 and found[0]["entry"] == entry, (out, err[-500:])
    evidence = found[0]["evidence"]
    assert evidence["loss_step"] == 20  # the next sampled step saw the poisoned weights' NaN loss
    assert evidence["grad_step_unsampled"] is (step is not None)
    if step is not None:
        assert evidence["grad_step"] == step and evidence["grad_nonfinite_with_finite_loss"] is True


# Every way a script passes arguments to the clipping functions, watched: by position, by name,
# through functools.partial. The script asserts that each one clipped as torch's own would (an
# assertion failing there is the run's exit status 1).
CLIP_CALL_FORMS = """
import functools
import torch
from torch import nn
from torch.nn.utils import clip_grad_value_
torch.manual_seed(0)
model = nn.Linear(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
by_value = [
    lambda: nn.utils.clip_grad_value_(model.parameters(), 0.01),
    lambda: nn.utils.clip_grad_value_(model.parameters(), clip_value=0.01),
    lambda: clip_grad_value_(parameters=model.parameters(), clip_value=0.01),
    lambda: functools.partial(nn.utils.clip_grad_value_, clip_value=0.01)(model.parameters()),
]
by_norm = [
    lambda: nn.utils.clip_grad_norm_(model.parameters(), 0.01),
    lambda: nn.utils.clip_grad_norm_(parameters=model.parameters(), max_norm=0.01, norm_type=2.0),
    lambda: torch.nn.utils.clip_grad.clip_grad_norm_(model.weight, max_norm=0.01),
]
for step in range(12):
    loss = model(torch.randn(16, 8) * 10).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    form = step % 7
    if form < 4:
        assert by_value[form]() is None
        assert all(float(p.grad.abs().max()) <= 0.01 + 1e-9 for p in model.parameters())
    else:
        total = by_norm[form - 4]()
        assert float(total) > 0.01  # the norm it measured, before clipping
        assert float(torch.linalg.vector_norm(model.weight.grad)) <= 0.01 + 1e-6
    opt.step()
"""


def test_the_clip_wrappers_take_every_argument_form_and_clip_as_torch_does(tmp_path):
    script = tmp_path / "clip_forms.py"
    script.write_text(CLIP_CALL_FORMS)
    code, out, err = kb_watch("--json", "--", sys.executable, str(script))
    report = json.loads(out)
    assert report["run"]["exit_status"] == 0 and report["run"]["error"] is None, (out, err[-800:])
    assert report["run"]["internal_errors"] == []


ONE_SAMPLE_AT_STEP = """
import sys
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
correction = int(sys.argv[1])
for step in range(30):
    x = torch.randn(1 if step == 15 else 8, 4)
    if sys.argv[2] == "method":
        x = (x - x.mean(0)) / (x.std(0, correction=correction) + 1e-5)
    else:
        var, mean = torch.var_mean(x, dim=0, correction=correction)
        x = (x - mean) / (var + 1e-5).sqrt()
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    if torch.isfinite(loss):
        loss.backward()
        opt.step()
"""


@pytest.mark.parametrize("form", ["method", "function"])
@pytest.mark.parametrize("correction, found", [(1, True), (0, False)])
def test_a_nan_std_of_one_sample_is_caught_on_an_unsampled_step(tmp_path, form, correction, found):
    """Step 15 is not sampled (the first 10, then every 10th): the std/var hook looks at every call.
    With correction=0 the same one-sample batch gives 0, not NaN, and nothing is reported."""
    script = tmp_path / "one_sample.py"
    script.write_text(ONE_SAMPLE_AT_STEP)
    code, out, err = kb_watch("--json", "--", sys.executable, str(script), str(correction), form)
    hits = [f for f in json.loads(out)["findings"] if f["code"] == "KBW049"]
    assert bool(hits) is found, (out, err[-500:])
    if found:
        assert hits[0]["step"] == 15 and hits[0]["evidence"]["input_shape"] == [1, 4]
        assert hits[0]["where"].endswith(":12" if form == "method" else ":14")


SCRIPTED = """
import torch
from torch import nn


@torch.jit.script
def standardize(x: torch.Tensor) -> torch.Tensor:
    return (x - x.mean(0)) / (torch.std(x, 0) + 1e-5)


scripted = torch.jit.script(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.1)))
head = nn.Sequential(nn.Linear(8, 3), nn.Softmax(dim=1))
opt = torch.optim.SGD(list(scripted.parameters()) + list(head.parameters()), lr=0.1)
torch.manual_seed(0)
for step in range(12):
    x, y = standardize(torch.randn(16, 4)), torch.randint(0, 3, (16,))
    loss = nn.functional.cross_entropy(head(scripted(x)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("trained")
"""


def test_torch_jit_script_compiles_under_watch_and_the_wrappers_return_after(tmp_path):
    """torch.jit.script of a model with nn.Dropout (F.dropout) and of a function calling torch.std
    compiles while watched (before, the wrapped functions broke it); the loss wrapper is back in
    place after scripting: the softmax head's double softmax is still found."""
    script = tmp_path / "scripted.py"
    script.write_text(SCRIPTED)
    code, out, err = kb_watch("--json", "--", sys.executable, str(script))
    report = json.loads(out)
    assert report["run"]["error"] is None and "trained" in err, err[-800:]
    assert [f["code"] for f in report["findings"]][:1] == ["KBW007"], out


@pytest.mark.parametrize("rows, expected", [
    ([[5, 6, 7, 0, 0], [5, 6, 0, 0, 0], [5, 6, 7, 8, 9]], (0, [(0, 3, 5), (1, 2, 5)])),  # right, longest row unpadded
    ([[2, 2, 5, 6, 7], [2, 2, 2, 5, 6]], (2, [(0, 0, 2), (1, 0, 3)])),                   # left padding
    ([[5, 6, 7, 7, 7], [5, 6, 7, 8, 9], [1, 2, 3, 4, 5]], None),  # one row ends in a repeat: text, not padding
    ([[5, 6, 7, 3, 3], [5, 6, 7, 4, 4]], None),                   # runs of a different id in each row
    ([[1, 1, 5, 6, 7], [1, 1, 8, 9, 4], [1, 1, 3, 5, 2], [1, 1, 7, 8, 9]], None),  # a start token doubled, not padding
])
def test_padding_is_a_run_of_one_id_at_one_edge_of_most_rows(rows, expected):
    from kb_tools.watch.checks.tensors import padding_runs
    assert padding_runs(torch.tensor(rows)) == expected
    assert padding_runs(torch.tensor(rows, dtype=torch.float32)) is None  # not ids


def test_a_model_that_returns_a_parameter_gets_no_hook_on_it(one_thread):
    """KBW012 marks each training forward's output to learn whether a backward reaches it; a hook on a
    leaf (a parameter returned as it is) would stay on it for the rest of the run, one per forward."""
    from torch import nn

    from kb_tools.watch import watch

    class Prior(nn.Module):  # a learned constant, returned as the parameter itself
        def __init__(self):
            super().__init__()
            self.logits = nn.Parameter(torch.zeros(3))
            self.drop = nn.Dropout(0.1)  # a layer whose mode matters, so KBW012 looks at the model

        def forward(self):
            return self.logits

    model = Prior()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    handle = watch(model, optimizer, steps=30, stream=io.StringIO())
    y = torch.randint(0, 3, (16,))
    for _ in range(30):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model().expand(16, 3), y).backward()
        optimizer.step()
    handle.stop()
    assert not model.logits._backward_hooks


def test_layers_no_train_or_eval_call_reached_are_told_from_deliberate_modes(one_thread):
    """KBW012 hears every Module.train() call: a Dropout built after model.eval() and put in its place is
    reported at the first grad-free forward; one given the mode of the layer it replaces, one switched
    back on with .train() (MC dropout) or a deep copy of such a model (its flags copied) is not; and
    torch's Module.train is put back after watching."""
    import copy

    from torch import nn

    from kb_tools.watch.checks.kbw012_train_eval_mode import TrainEvalMode
    from kb_tools.watch.session import Session
    original = nn.Module.train

    def run(prepare) -> list:
        session = Session(checks=[TrainEvalMode], stop_run=False)
        session.install()
        try:
            torch.manual_seed(0)
            model = prepare(nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2)).eval())
            with torch.no_grad():
                model(torch.randn(3, 4))
        finally:
            session.end()
            session.uninstall()
        return session.findings()

    def replaced(model, mode=None):
        model[1] = nn.Dropout(0.3) if mode is None else nn.Dropout(0.3).train(mode)
        return model

    def switched_on(model):
        model[1].train()
        return model

    found = run(replaced)
    assert [f["code"] for f in found] == ["KBW012"] and "no train() or eval() call ever reached it" in found[0]["message"]
    assert found[0]["evidence"]["layers"] == ["1 (Dropout)"]
    assert run(lambda m: replaced(m, False)) == []
    assert run(switched_on) == []
    assert run(lambda m: copy.deepcopy(switched_on(m))) == []
    assert nn.Module.train is original


@pytest.mark.parametrize("source, result, order", [
    ((8, 16, 16, 3), (8, 3, 16, 16), (8, 3, 16, 16)),   # NHWC batch viewed as NCHW
    ((2, 32, 48), (32, 96), (32, 2, 48)),               # (directions, B, H) final state viewed (B, 2H)
    ((4, 8, 16, 32), (4, 16, 256), (4, 16, 8, 32)),     # (B, heads, T, D) merged as (B, T, heads * D)
    ((32, 10, 8), (10, 32, 8), (10, 32, 8)),            # batch-first read as time-major
    ((4, 6), (6, 4), (6, 4)),
    ((8, 3, 16, 16), (8, 3, 256), None),                # merge neighbours
    ((4, 16, 256), (4, 16, 8, 32), None),               # split one axis
    ((8, 16, 16, 6), (8, 256, 2, 3), None),             # a merge and a split side by side
    ((10, 32, 64), (10, 256, 8), None),                 # split into heads and merge with batch: no reordering
    ((2, 6), (3, 4), None),                             # crossing, but no order of (2, 6) gives it
    ((32, 784), (32, 1, 28, 28), None),                 # size-1 axes are left out
    ((8, 8, 8), (8, 8, 8), None),                       # equal sizes swapped keep the shape: not seen
    ((64, 32, 4, 4), (4, 4, 4, 4, 4, 32), (64, 4, 4, 32)),  # channels-first windows read as channels-last
    ((64, 4, 4, 32), (4, 4, 4, 4, 4, 32), None),        # channels-last windows split back: no reordering
    ((100, 32, 512), (100, 256, 64), None),             # (T, B, E) heads split and merged with the batch
    ((6, 512), (32, 6, 4, 4), (32, 6, 4, 4)),           # generated (bands, k * k * E) kernel viewed (E, bands, k, k)
    ((6, 512), (6, 4, 4, 32), None),                    # the same kernel split in its own order
], ids=["nhwc", "lstm-state", "heads", "time-major", "matrix", "merge", "split", "merge-and-split", "mha-split",
        "no-order", "unit-axis", "same-shape", "windows-unpermuted", "windows", "mha-realistic", "kernel-split-moved",
        "kernel-split"])
def test_a_view_is_a_reordering_only_when_it_crosses_its_input_and_a_reorder_gives_it(source, result, order):
    from kb_tools.watch.checks.kbw074_view_reorders_dimensions import reordering
    assert reordering(source, result) == order


def test_a_loss_input_cancels_only_when_every_path_to_a_leaf_is_a_minus_a_plus_a_constant():
    """KBW034's second form: a straight-through output subtracted from its own input has exactly zero
    gradient; the estimator itself, a detached subtraction and a second path do not cancel."""
    from kb_tools.watch.checks.kbw034_loss_term_detached import gradient_cancelled
    w = torch.randn(4, requires_grad=True)
    x, q = w * 2, torch.randn(4)
    st = x + (q - x).detach()
    forms = {"x - st": (x - st, True), "st - x": (st - x, True), "x - x": (x - x, True),
             "st": (st, False), "x - q.detach()": (x - q, False), "(x - st) + x": ((x - st) + x, False),
             "leaf": (w, False)}
    for name, (t, cancelled) in forms.items():
        assert gradient_cancelled([t, None]) is cancelled, name
        if cancelled:
            (grad,) = torch.autograd.grad(t.sum(), w, retain_graph=True)
            assert not grad.any(), name


def _masked_loss_forms():
    """name -> (the loss of a (4, 10) per-token loss with a right-padding mask, masked means found,
    mask times a reduced loss found)."""
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 10, 5, generator=g, requires_grad=True)
    targets = torch.randint(0, 5, (4, 10), generator=g)
    pad = (torch.arange(10) < torch.tensor([3, 10, 6, 8]).unsqueeze(1)).float()   # 27 of 40 kept
    scattered = torch.tensor([1.0, 0.0] * 20).view(4, 10)
    per_token = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    reduced = F.cross_entropy(logits.transpose(1, 2), targets)
    return {
        "mean": ((per_token * pad).mean(), 1, False),
        "sum-over-numel": ((per_token * pad).sum() / per_token.numel(), 1, False),
        "where-mean": (torch.where(pad.bool(), per_token, 0.0).mean(), 1, False),
        "masked-fill-mean": (per_token.masked_fill(pad == 0, 0).mean(), 1, False),
        "left-padding-broadcast": ((per_token.unsqueeze(-1) * pad.flip(1).unsqueeze(-1)).mean(), 1, False),
        "inside-a-sum-of-terms": (0.5 * (per_token * pad).mean() + logits.pow(2).mean(), 1, False),
        "reduced-times-mask": ((reduced * pad).sum() / pad.sum(), 0, True),
        "sum-over-mask-sum": ((per_token * pad).sum() / pad.sum(), 0, False),
        "mean-over-mask-mean": ((per_token * pad).mean() / pad.mean(), 0, False),
        "indexed-mean": (per_token[pad.bool()].mean(), 0, False),
        "scattered-mask": ((per_token * scattered).mean(), 0, False),
        "per-sample-mask": ((per_token.mean(dim=1) * torch.tensor([1.0, 0.0, 1.0, 1.0])).mean(), 0, False),
    }


@pytest.mark.parametrize("form", list(_masked_loss_forms()))
def test_a_masked_mean_is_found_when_its_padding_stays_in_the_denominator(form):
    from kb_tools.watch.checks.kbw079_masked_loss_averaged_over_padding import find_masked_means
    loss, means, on_reduced = _masked_loss_forms()[form]
    shares, reduced = find_masked_means(loss.grad_fn)
    assert (len(shares), reduced) == (means, on_reduced)
    assert all(share == pytest.approx(27 / 40) for share in shares)


def test_a_row_has_one_fingerprint_wherever_it_sits_and_other_rows_get_others():
    from kb_tools.watch.checks.tensors import row_fingerprints
    g = torch.Generator().manual_seed(0)
    rows = torch.randn(40, 3, 12, 12, generator=g)
    alone = row_fingerprints(rows)
    assert len(set(alone)) == 40                                     # different rows, different numbers
    mixed = row_fingerprints(torch.cat([rows[25:], torch.randn(7, 3, 12, 12, generator=g), rows[:25]]))
    assert mixed[:15] == alone[25:] and mixed[22:] == alone[:25]     # the same row in another batch and place
    assert row_fingerprints(rows.double())[:3] != alone[:3]          # bit patterns: the dtype is part of the row
    assert row_fingerprints(torch.randint(0, 9, (8, 16), generator=g)) is not None
    assert row_fingerprints(torch.randn(8, 4)) is None               # too few values to tell rows apart
    assert row_fingerprints(torch.randn(1, 64)) is None


def test_a_batch_fingerprint_sums_in_float64_without_a_float64_copy():
    from torch.profiler import ProfilerActivity, profile

    from kb_tools.watch.checks.tensors import fingerprint
    g = torch.Generator().manual_seed(0)
    batch = torch.randn(32, 3, 32, 32, generator=g) * 1e3
    for t in (batch, batch[:, 1], batch.transpose(1, 3), torch.randint(-9, 9, (40_001,), generator=g),
              batch.double(), batch.half()):
        shape, dtype, values = fingerprint(t)
        assert values[0] == pytest.approx(float(t.double().sum()), rel=1e-6, abs=1e-6)  # float32 blocks
        assert fingerprint(t.clone()) == (shape, dtype, values)      # equal tensors, equal fingerprints
    changed = batch.clone()
    changed[5, 1, 2, 3] += 1.0                                       # one element no strided read sees
    assert fingerprint(changed) != fingerprint(batch)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fingerprint(batch)
    allocated = sum(e.self_cpu_memory_usage for e in prof.events() if e.self_cpu_memory_usage > 0)
    assert allocated < batch.numel() * batch.element_size() // 8     # the old float64 copy was twice its size


def test_the_gradient_norm_in_host_memory_is_the_total_norm_read_without_foreach_norm():
    """On the CPU the total gradient norm is taken tensor by tensor (torch._foreach_norm on every step
    cost a small CNN hundreds of page faults a step, BENCHMARKS): the same value as the device path,
    NaN and inf carried through, sparse gradients read."""
    from torch.profiler import ProfilerActivity, profile

    from kb_tools.watch.checks.tensors import grad_norm_of, grad_norm_tensor, host_grad_norm
    g = torch.Generator().manual_seed(0)
    grads = [torch.randn(16, 3, 3, 3, generator=g), torch.randn(16, generator=g) * 1e3,
             torch.randn(10, 64, generator=g).double(), torch.randn(7, generator=g).half()]
    expected = float(grad_norm_tensor(grads))
    assert host_grad_norm(grads) == pytest.approx(expected, rel=1e-6)
    assert grad_norm_of(grads) == pytest.approx(expected, rel=1e-6)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        grad_norm_of(grads)
    assert not [e.name for e in prof.events() if "foreach" in e.name]
    with_nan = [grads[0], torch.tensor([1.0, float("nan")]), torch.tensor([float("inf")])]
    assert math.isnan(host_grad_norm(with_nan))
    assert host_grad_norm([grads[0], torch.tensor([float("inf"), 2.0])]) == float("inf")
    sparse = torch.sparse_coo_tensor([[0, 3]], [3.0, 4.0], (6,))
    assert host_grad_norm([sparse]) == pytest.approx(5.0)


def test_dead_relu_share_is_the_units_zero_for_every_example():
    from kb_tools.watch.checks import kbw030_dead_relu as dead
    from kb_tools.watch.session import Session
    g = torch.Generator().manual_seed(0)
    out = torch.relu(torch.randn(32, 10, 6, 6, generator=g))
    out[:, :7] = 0.0                                                 # 7 of 10 channels dead on every example
    out[:, 3, 0, 0] = float("nan")                                   # a NaN keeps a channel alive
    out[4, 5, 2, 2] = 0.5                                            # one live value on one example keeps one
    relu = torch.nn.ReLU()
    check = dead.DeadRelu(Session(checks=[]))
    check.session.step = 5
    check.on_module_forward(relu, out, True)
    (st,) = check.states.values()
    assert (st.share, st.units) == (pytest.approx(0.5), 10)
    check.session.step = 6
    check.on_module_forward(relu, torch.relu(torch.randn(32, 8, generator=g)) * 0, True)  # 2-d: features
    assert (st.share, st.units) == (1.0, 8)


EPOCH_THEN_EVALUATION = os.path.join(SCRIPTS, "epoch_then_evaluation.py")


def test_after_steps_the_epoch_ends_early_and_the_scripts_evaluation_is_watched():
    code, out, err = kb_watch("--steps", "20", "--json", "--", sys.executable, EPOCH_THEN_EVALUATION, "train-mode")
    report = json.loads(out)
    run = report["run"]
    # the epoch's loop ended after the 20th step, its evaluation ran, the second epoch trained the
    # RESUMED_STEPS steps watched after it, and the rest of the script ran in brief: that epoch
    # ended there and its evaluation took FAST_FORWARD_BATCHES of the 10 validation batches
    from kb_tools.watch.session import FAST_FORWARD_BATCHES, RESUMED_STEPS
    assert "epoch 0: 20 steps" in err and f"epoch 1: {RESUMED_STEPS} steps" in err
    assert run["steps"] == 20 + RESUMED_STEPS and run["stopped_after_steps"] == 20 and run["exit_status"] == 0
    assert run["evaluation_pass"] == {"batches": 10, "model_calls": 10, "ended_by": "the next epoch",
                                      "resumed_steps": RESUMED_STEPS, "fast_forward": {
                                          "steps": 0, "model_calls": FAST_FORWARD_BATCHES,
                                          "ended_by": "the script's end"}}
    assert code == 1 and [f["code"] for f in report["findings"]] == ["KBW012"]
    assert "in training mode" in report["findings"][0]["message"]

    code, out, err = kb_watch("--steps", "20", "--json", "--", sys.executable, EPOCH_THEN_EVALUATION, "clean")
    report = json.loads(out)
    assert code == 0 and report["findings"] == [] and report["run"]["evaluation_pass"]["batches"] == 10


def test_an_evaluation_that_leaves_the_model_in_eval_mode_shows_in_the_steps_after_it():
    """The commonest train-eval-mode bug in real code: validate() calls model.eval() and nothing puts
    the model back. It shows only once training resumes, so the steps after the pass are watched."""
    code, out, err = kb_watch("--steps", "20", "--json", "--", sys.executable, EPOCH_THEN_EVALUATION, "stays-eval")
    report = json.loads(out)
    assert code == 1 and [f["code"] for f in report["findings"]] == ["KBW012"]
    assert "eval mode" in report["findings"][0]["message"]
    assert report["run"]["evaluation_pass"]["resumed_steps"] == 3 and report["run"]["exit_status"] == 0
    code, out, _ = kb_watch("--steps", "20", "--", sys.executable, EPOCH_THEN_EVALUATION, "stays-eval")
    assert "ended by the next epoch, then 3 training steps after it" in out


CLOSING_EVALUATION = os.path.join(SCRIPTS, "closing_evaluation.py")


def test_the_rest_of_the_script_runs_in_brief_so_a_closing_evaluation_is_watched():
    """A fresh model evaluated after the training, without model.eval(): only the rest of the script,
    run with one batch per training epoch, reaches it within --steps 20; --no-fast-forward does not."""
    code, out, err = kb_watch("--steps", "20", "--json", "--", sys.executable, CLOSING_EVALUATION, "closing")
    report = json.loads(out)
    assert code == 1 and [f["code"] for f in report["findings"]] == ["KBW012"]
    assert "after load_state_dict" in report["findings"][0]["message"]
    brief = report["run"]["evaluation_pass"]["fast_forward"]
    # epochs 2-5 give one training batch each, and each of their evaluations two of the 10 batches
    assert brief["steps"] == 4 and 4 * 3 <= brief["model_calls"] <= 4 * 3 + 6 and brief["ended_by"] == "the script's end"
    assert "epoch 5:" in err and "final model:" in err and report["run"]["exit_status"] == 0

    code, out, _ = kb_watch("--steps", "20", "--json", "--", sys.executable, CLOSING_EVALUATION, "clean")
    assert code == 0 and json.loads(out)["findings"] == []
    code, out, err = kb_watch("--steps", "20", "--no-fast-forward", "--json", "--", sys.executable,
                              CLOSING_EVALUATION, "closing")
    run = json.loads(out)["run"]
    assert code == 0 and "fast_forward" not in run["evaluation_pass"] and "final model:" not in err
    code, out, err = kb_watch("--no-fast-forward", "--", sys.executable, CLOSING_EVALUATION, "clean")
    assert code == 2 and "--no-fast-forward changes how --steps N stops; it needs --steps" in err


def test_the_brief_run_is_bounded_and_an_error_in_it_ends_the_run_cleanly():
    from kb_tools.watch.session import FAST_FORWARD_STEPS
    code, out, err = kb_watch("--steps", "20", "--", sys.executable, CLOSING_EVALUATION, "many-epochs")
    assert code == 0 and "epoch 900" not in out
    assert out.splitlines()[-1].startswith(
        f"kb watch: nothing found in {20 + 3 + FAST_FORWARD_STEPS} optimizer steps (stopped after --steps 20 and "
        f"an evaluation pass of 10 batches and 10 model calls, ended by the next epoch, then 3 training steps "
        f"after it, then the rest of the script in brief ({FAST_FORWARD_STEPS} steps and")
    assert f"ended by the limit of {FAST_FORWARD_STEPS} steps)" in out.splitlines()[-1]

    code, out, err = kb_watch("--steps", "20", "--json", "--", sys.executable, CLOSING_EVALUATION, "raises")
    run = json.loads(out)["run"]
    assert code == 0 and run["exit_status"] == 0 and run["error"] is None and run["stopped_after_steps"] == 20
    assert run["evaluation_pass"]["fast_forward"]["ended_by"].startswith(
        "an error in the script: RuntimeError: shape '[50, -1, 2]' is invalid")
    assert "the script then raised this while the rest of the script ran in brief" in err
    assert err.count("Traceback (most recent call last)") == 1 and "kb_tools" not in err


def test_no_evaluation_pass_stops_right_at_the_steps():
    code, out, err = kb_watch("--steps", "20", "--no-evaluation-pass", "--json", "--", sys.executable,
                              EPOCH_THEN_EVALUATION, "train-mode")
    report = json.loads(out)
    assert code == 0 and report["findings"] == [] and "epoch 0" not in err
    assert report["run"]["evaluation_pass"] is None and report["run"]["stopped_after_steps"] == 20


def test_the_evaluation_pass_is_bounded_and_an_error_in_it_ends_the_run_cleanly():
    from kb_tools.watch.session import EVALUATION_PASS_CALLS as cap
    assert cap < 500  # the script's "long" evaluation has 500 batches
    code, out, err = kb_watch("--steps", "5", "--", sys.executable, EPOCH_THEN_EVALUATION, "long")
    assert code == 0 and "epoch 0" not in out
    assert out.splitlines()[-1].startswith(
        f"kb watch: nothing found in 5 optimizer steps (stopped after --steps 5 and an evaluation pass of "
        f"{cap} batches and {cap} model calls, ended by the limit of {cap} batches); watched 1 model")

    code, out, err = kb_watch("--steps", "5", "--json", "--", sys.executable, EPOCH_THEN_EVALUATION, "raises")
    run = json.loads(out)["run"]
    assert code == 0 and run["stopped_after_steps"] == 5 and run["exit_status"] == 0 and run["error"] is None
    assert run["evaluation_pass"]["ended_by"] == "an error in the script: RuntimeError: validation shard missing"
    assert "--steps 5 reached; the script then raised this in the evaluation pass" in err
    assert err.count("Traceback (most recent call last)") == 1 and "kb_tools" not in err


def test_a_run_without_a_dataloader_stops_at_the_steps_with_no_evaluation_pass(tmp_path):
    code, out, _ = kb_watch("--steps", "7", "--json", "--", sys.executable,
                            os.path.join(SCRIPTS, "finally_marker.py"), str(tmp_path / "m"))
    run = json.loads(out)["run"]
    assert code == 0 and run["evaluation_pass"] is None
    assert run["evaluation_pass_skipped"] == "no DataLoader fed the steps"
    # the summary says that the script's evaluation went unwatched; with --no-evaluation-pass that was asked for
    code, out, _ = kb_watch("--steps", "7", "--", sys.executable, os.path.join(SCRIPTS, "finally_marker.py"),
                            str(tmp_path / "m"))
    assert "(stopped after --steps 7; no DataLoader fed the steps, so the script's own evaluation was not " \
           "watched: watch the whole run to check it)" in out.splitlines()[-1]
    code, out, _ = kb_watch("--steps", "7", "--no-evaluation-pass", "--json", "--", sys.executable,
                            os.path.join(SCRIPTS, "finally_marker.py"), str(tmp_path / "m"))
    assert json.loads(out)["run"]["evaluation_pass_skipped"] is None


# ---------------------------------------------------------------- the device of the tensors kb watch makes

_FACTORIES = {"tensor", "as_tensor", "zeros", "ones", "empty", "full", "arange", "linspace", "eye",
              "rand", "randn", "randint", "randperm", "zeros_like"}


def test_every_tensor_the_watch_code_makes_names_its_device():
    """A user may run with torch.set_default_device("cuda"): a tensor kb watch creates without naming
    its device lands there and meets the CPU copies the checks read (a CUDA run showed KBW060,
    KBW065 and KBW078 failing so, and a CPU generator refused for a CUDA draw)."""
    missing = []
    for path in sorted(glob.glob(os.path.join(ROOT, "kb_tools", "watch", "**", "*.py"), recursive=True)):
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _FACTORIES \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch" \
                    and not node.func.attr.endswith("_like") and "device" not in {k.arg for k in node.keywords}:
                missing.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} torch.{node.func.attr}")
    assert missing == []


@pytest.mark.parametrize("case, code", [
    ("new-token-embedding-init/bug_concat_random_rows", "KBW060"),
    ("bos-token-duplication/bug_chat_text_with_bos_tokenized_again", "KBW078"),
    ("padded-loss-reduction/bug_causal_lm_labels_copy_padded_ids", "KBW065"),
    ("data-leakage/bug_validation_split_drawn_twice", "KBW076"),
    ("adam-eps-low-precision/bug_model_half_trainer", "KBW027"),
])
def test_the_checks_create_no_tensor_on_the_default_device(case, code):
    """The same at run time: while the check that finds the case works, no torch factory called
    from kb_tools/watch leaves the device to the default."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._device import _device_constructors
    from kb_tools.watch.checks import tensors
    tensors._row_weights.clear()   # made again, as in a fresh process
    watch_dir = os.path.join(ROOT, "kb_tools", "watch")
    undeclared = []

    class Spy(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in _device_constructors() and kwargs.get("device") is None:
                caller = sys._getframe(1)
                if caller.f_code.co_filename.startswith(watch_dir):
                    undeclared.append(f"{os.path.relpath(caller.f_code.co_filename, ROOT)}:{caller.f_lineno}")
            return func(*args, **kwargs)

    with Spy():
        _, out, err = kb_watch("--steps", str(STEPS), "--json", "--", sys.executable,
                               os.path.join("tests", "watch", "cases", case + ".py"))
    report = json.loads(out)
    assert [f["code"] for f in report["findings"]][:1] == [code], err[-1000:]
    assert report["run"]["internal_errors"] == []
    assert undeclared == []


def test_a_graph_walk_meets_every_node_once_when_torch_wraps_nodes_anew():
    """torch 2.11 gives an autograd node a new Python object once its last one is freed, so a walk
    that remembers nodes by id() alone skipped nodes whose id a freed one had had (KBW041 then
    missed its cases, KBW006 named the wrong entry). Here nodes are wrapped as 2.11 wraps them:
    the live wrapper if there is one, else a new one."""
    import weakref

    from kb_tools.watch.checks.tensors import nodes_from

    live = weakref.WeakValueDictionary()

    class Wrapper:
        def __init__(self, key):
            self.key = key

        @property
        def next_functions(self):
            return tuple((wrap(k), 0) for k in children[self.key])

    def wrap(key):
        w = live.get(key)
        if w is None:
            w = live[key] = Wrapper(key)
        return w

    # a chain of 300 nodes, each also pointing two ahead (a diamond at every node)
    children = {k: [j for j in (k + 1, k + 2) if j < 300] for k in range(300)}
    keys = [node.key for node in nodes_from([wrap(0)])]
    assert sorted(keys) == list(range(300))


def test_per_sample_gradients_under_vmap_leave_the_checks_on(tmp_path):
    """torch.func.vmap(grad(...)) (per-sample gradients, DP-SGD) runs the model and the loss on
    batched stand-ins that no check can read: the checks sit it out instead of raising and being
    switched off for the rest of the run."""
    script = tmp_path / "dp_sgd.py"
    script.write_text(textwrap.dedent("""\
        import torch
        import torch.nn.functional as F
        from torch import nn
        from torch.func import functional_call, grad, vmap

        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(10, 32), nn.LayerNorm(32), nn.ReLU(), nn.Linear(32, 3))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(256, 10), torch.randint(0, 3, (256,))

        def sample_loss(params, xi, yi):
            out = functional_call(model, params, (xi.unsqueeze(0),))
            return F.cross_entropy(out, yi.unsqueeze(0))

        per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0))
        for step in range(30):
            i = (step * 32) % 256
            params = {k: v.detach() for k, v in model.named_parameters()}
            grads = per_sample(params, x[i:i + 32], y[i:i + 32])
            optimizer.zero_grad()
            for name, p in model.named_parameters():
                p.grad = grads[name].clamp(-1, 1).mean(0)
            optimizer.step()
        """))
    code, out, err = kb_watch("--steps", "20", "--json", "--", sys.executable, str(script))
    report = json.loads(out)
    assert report["run"]["internal_errors"] == [], report["run"]["internal_errors"]
    assert report["run"]["steps"] == 20, err[-1000:]


def test_an_unsampled_step_costs_a_few_ops_however_many_parameters():
    """Between sampled steps the checks issue a fixed handful of ops (the gradient norm, the loss's
    sum kept on the device for the NaN dating), not one per parameter: on a GPU each op is a
    launch on the step's critical path (bench/watch_overhead.py --count-ops)."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        from watch_overhead import count_ops
    finally:
        sys.path.remove(os.path.join(ROOT, "bench"))
    from torch import nn

    def mlp_setup(layers):
        def setup(device):
            torch.manual_seed(0)
            model = nn.Sequential(*[nn.Sequential(nn.Linear(16, 16), nn.Tanh()) for _ in range(layers)])
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            x = torch.randn(8, 16)

            def step():
                optimizer.zero_grad()
                model(x).pow(2).mean().backward()
                optimizer.step()
            return step
        return setup

    few, many = (count_ops(mlp_setup(n), every=10 ** 9, steps=20)["ops_per_step"] for n in (2, 40))
    assert few == many <= 8, (few, many)


def test_reading_an_evaluation_dataset_leaves_the_random_streams_and_the_hooks_as_they_were(monkeypatch):
    """KBW087 reads the evaluation dataset itself: the reads see fresh randomness (that is what
    they measure), no hook sees them, and the user's random streams continue as if they never ran."""
    import random

    numpy = pytest.importorskip("numpy")
    from kb_tools.watch import hooks
    from kb_tools.watch.checks.kbw087_evaluation_data_random import _leaves
    from kb_tools.watch.checks.loaders import read_unwatched

    sessions = []

    class Jittered(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, index):
            sessions.append(hooks.active_session())
            return torch.randn(16) + random.random() + float(numpy.random.rand()), index

    def seed():
        torch.manual_seed(3)
        random.seed(3)
        numpy.random.seed(3)

    def draws():
        return torch.rand(3).tolist(), random.random(), float(numpy.random.rand())

    seed()
    expected = draws()
    seed()
    watching = object()
    monkeypatch.setattr(hooks, "_active", watching)
    reads = read_unwatched(Jittered(), [0, 2], 2, _leaves)
    assert hooks.active_session() is watching and sessions and all(s is None for s in sessions)
    assert draws() == expected
    first, second = reads[0][0], reads[0][1]
    assert not torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


def _reads(item, indices=3, reads=3):
    from kb_tools.watch.checks.kbw087_evaluation_data_random import _leaves
    return [[_leaves(item(i)) for _ in range(reads)] for i in range(indices)]


@pytest.mark.parametrize("kind, altered", [
    ("flipped image, label kept", True),
    ("mixed with other items, label mixed too", True),
    ("fresh random inputs and labels", False),
    ("fresh random inputs at random scales", False),
    ("two views of one input", False),
    ("the same item every read", False),
])
def test_an_evaluation_item_is_augmented_only_when_it_stays_the_same_item(kind, altered):
    from kb_tools.watch.checks.kbw087_evaluation_data_random import _altered_reads

    g = torch.Generator().manual_seed(0)
    images = torch.nn.functional.avg_pool2d(torch.rand(3, 3, 36, 36, generator=g), 5, 1)  # smooth, 3x32x32

    def flipped(i):
        return (images[i].flip(-1) if torch.rand((), generator=g) < 0.5 else images[i]) + 0.01 * torch.randn(
            3, 32, 32, generator=g), i

    def mixed(i):
        j, w = int(torch.randint(0, 3, (), generator=g)), float(torch.rand((), generator=g)) * 0.5
        return (1 - w) * images[i] + w * images[j], torch.tensor([1 - w, w])

    def fresh(i):
        return torch.randn(400, generator=g), torch.randint(0, 10, (), generator=g)

    def scaled(i):
        return torch.randn(400, generator=g) * torch.rand((), generator=g) * 10, torch.rand(1, generator=g)

    def views(i):
        return flipped(i)[0], flipped(i)[0]

    def same(i):
        return images[i], i

    item = {"flipped image, label kept": flipped, "mixed with other items, label mixed too": mixed,
            "fresh random inputs and labels": fresh, "fresh random inputs at random scales": scaled,
            "two views of one input": views, "the same item every read": same}[kind]
    if altered:
        assert _altered_reads(_reads(item)) is not None
    else:   # random draws must not pass for an altered item by chance: 200 tries, none
        assert [_altered_reads(_reads(item)) for _ in range(200 if kind.startswith("fresh") else 5)] \
            == [None] * (200 if kind.startswith("fresh") else 5)


class _Encoder:
    """A fitted label encoder as a dataset holds one: its classes_ in the order it numbers them."""

    def __init__(self, classes):
        self.classes_ = classes


class _Split(torch.utils.data.Dataset):
    def __init__(self, **attributes):
        self.__dict__.update(attributes)


@pytest.mark.parametrize("train, evaluation, name", [
    (dict(classes=["fox", "cat", "dog"]), dict(classes=["cat", "dog", "fox"]), "classes"),
    (dict(class_to_idx={"a": 0, "b": 1, "c": 2}), dict(class_to_idx={"b": 0, "a": 1}), "class_to_idx"),
    (dict(idx_to_class={0: "a", 1: "b"}), dict(idx_to_class={0: "b", 1: "a"}), "idx_to_class"),
    (dict(json_category_id_to_contiguous_id={1: 1, 2: 2, 3: 3}),
     dict(json_category_id_to_contiguous_id={2: 1, 1: 2, 3: 3}), "json_category_id_to_contiguous_id"),
    (dict(encoder=_Encoder(["neg", "neu", "pos"])), dict(encoder=_Encoder(["pos", "neg", "neu"])), "encoder.classes_"),
    (dict(class_to_idx={"a": 0, "b": 1, "c": 2}), dict(class_to_idx={"a": 0, "c": 2}), None),   # fewer classes, same numbers
    (dict(label_counts={"a": 40, "b": 12}), dict(label_counts={"a": 12, "b": 40}), None),       # counts number nothing
    (dict(class_rank={"a": 0, "b": 1}), dict(class_rank={"a": 1, "b": 0}), None),               # not a label map's name
    (dict(classes=["a", "b", "c"]), dict(classes=["a", "b"]), None),                           # another class set
    (dict(label2id={"x": 0, "y": 1}), dict(label2id={"x": 0, "y": 1}), None),
])
def test_two_splits_disagree_only_when_a_label_map_numbers_a_shared_class_differently(train, evaluation, name):
    from kb_tools.watch.checks.kbw088_class_numbering_differs import disagreement, label_maps

    wrapped = torch.utils.data.Subset(_Split(**evaluation), [0])   # a map is found through the wrappers too
    found = disagreement(label_maps(_Split(**train)), label_maps(wrapped))
    assert (found and found["name"]) == name


def _owned_draw_dataset():
    numpy = pytest.importorskip("numpy")

    class OwnDraws(torch.utils.data.Dataset):
        """Each item is one draw from a generator the dataset owns."""

        def __init__(self):
            self.rng = numpy.random.default_rng(0)

        def __len__(self):
            return 4

        def __getitem__(self, index):
            return torch.tensor(self.rng.random(), device="cpu")
    return OwnDraws


def _reseed(worker_id):
    import numpy
    info = torch.utils.data.get_worker_info()
    info.dataset.rng = numpy.random.default_rng(info.seed)


@pytest.mark.parametrize("reseeded", [False, True])
def test_workers_copy_a_dataset_generator_in_one_state_unless_reseeded(reseeded):
    """What KBW089 states, on this torch: two workers, each with its copy of the dataset, draw the
    same numbers from a generator the dataset owns; a worker_init_fn that reseeds it parts them."""
    loader = torch.utils.data.DataLoader(_owned_draw_dataset()(), batch_size=1, num_workers=2,
                                         worker_init_fn=_reseed if reseeded else None)
    first, second = [float(b) for b in loader][:2]   # items 0 and 1 come from workers 0 and 1
    assert (first == second) is not reseeded


def test_a_dataset_generator_is_found_through_transforms_and_the_process_wide_one_is_not():
    from kb_tools.watch.checks.kbw089_dataset_generator_copied_to_workers import _key, _state, owned_generators

    class Noise:
        def __init__(self):
            self.generator = torch.Generator().manual_seed(1)

    dataset = _owned_draw_dataset()()
    dataset.transform = [Noise()]
    dataset.shared = torch.default_generator   # the process-wide generator is the DataLoader's to seed
    found = owned_generators(dataset)
    assert sorted(path for path, _ in found) == ["OwnDraws.rng", "OwnDraws.transform[0].generator"]
    before = _key(_state(dataset.rng))
    assert dataset[0] is not None and _key(_state(dataset.rng)) != before


def test_a_loader_trains_once_a_backward_follows_its_batch_and_evaluates_after_two_quiet_batches():
    from types import SimpleNamespace

    from kb_tools.watch.checks.loaders import LoaderRoles

    class Loader:
        pass

    roles, train, val = LoaderRoles(), Loader(), Loader()
    student = SimpleNamespace(module=SimpleNamespace(training=True))
    teacher = SimpleNamespace(module=SimpleNamespace(training=False))
    assert roles.batch(train) is None
    roles.model_call(teacher, grad_enabled=False)   # a teacher's call on the training batch...
    roles.model_call(student, grad_enabled=True)
    roles.backward()                                # ...followed by a backward: a training batch
    assert roles.batch(val) == ("training", train)
    roles.model_call(teacher, grad_enabled=False)
    assert roles.batch(val) is None                 # one quiet batch is not enough
    roles.model_call(teacher, grad_enabled=False)
    assert roles.batch(train) == ("evaluation", val)
    roles.model_call(student, grad_enabled=True)
    roles.backward()
    assert roles.batch(train) is None               # each role is told once


def test_the_end_of_the_run_settles_what_followed_the_last_batch():
    """An evaluation over two batches that ends the script has no next batch to settle its second one:
    the end of the run does, and a last batch nothing used settles nothing."""
    from types import SimpleNamespace

    from kb_tools.watch.checks.loaders import LoaderRoles

    class Loader:
        pass

    model = SimpleNamespace(module=SimpleNamespace(training=False))
    roles, train, val = LoaderRoles(), Loader(), Loader()
    roles.batch(train)
    roles.backward()
    assert roles.batch(val) == ("training", train)
    roles.model_call(model, grad_enabled=False)
    assert roles.batch(val) is None
    roles.model_call(model, grad_enabled=False)
    assert roles.finish() == ("evaluation", val)
    assert roles.finish() is None                   # settled once
    idle = LoaderRoles()
    idle.batch(val)
    assert idle.finish() is None


def test_a_loader_built_again_over_its_dataset_goes_on_with_the_evaluation_tally_but_not_a_training_one():
    """An evaluation helper that builds a one-batch loader on each call settles as evaluation on its second
    call; a loader over the training loader's own dataset (an evaluation on the training set) starts
    afresh, and a loader over another dataset does too."""
    from types import SimpleNamespace

    from kb_tools.watch.checks.loaders import LoaderRoles

    class Loader:
        def __init__(self, dataset):
            self.dataset = dataset

    class Data:
        pass

    train_data, val_data, other_data = Data(), Data(), Data()
    model = SimpleNamespace(module=SimpleNamespace(training=False))
    roles, train = LoaderRoles(), Loader(train_data)
    assert roles.batch(train) is None
    roles.backward()
    first_val = Loader(val_data)
    assert roles.batch(first_val) == ("training", train)
    roles.model_call(model, grad_enabled=False)
    assert roles.batch(train) is None               # one evaluation batch so far
    roles.backward()
    second_val = Loader(val_data)                   # built again by the next evaluation
    assert roles.batch(second_val) is None
    roles.model_call(model, grad_enabled=False)
    assert roles.batch(train) == ("evaluation", second_val)
    roles.backward()
    on_training_rows = Loader(train_data)
    assert roles.batch(on_training_rows) is None
    roles.model_call(model, grad_enabled=False)
    assert roles.batch(Loader(other_data)) is None  # a training dataset's tally is not carried over
    roles.model_call(model, grad_enabled=False)
    assert roles.batch(train) is None               # the other dataset's loader: one batch only


def test_a_slow_dataset_is_not_read_past_the_budget_and_a_huge_item_is_kept_small():
    import time as clock

    from kb_tools.watch.checks.kbw087_evaluation_data_random import MAX_PART_VALUES, _leaves
    from kb_tools.watch.checks.loaders import read_unwatched

    reads = []

    class Slow(torch.utils.data.Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, index):
            reads.append(index)
            clock.sleep(0.05)
            return torch.zeros(4)

    assert read_unwatched(Slow(), [0, 1, 2], 3, budget_s=0.01) is None and len(reads) == 1
    volume = torch.arange(3 * MAX_PART_VALUES, dtype=torch.float32)
    kept = _leaves((volume, 1))[0]
    assert kept.numel() <= MAX_PART_VALUES and torch.equal(kept, _leaves((volume.clone(), 1))[0])


def test_the_torch_tensor_wrapper_returns_what_torch_does_and_looks_only_on_sampled_steps(one_thread, monkeypatch):
    """torch.tensor / torch.as_tensor under watch give what torch gives for every kind of data (values,
    dtype, no graph; as_tensor of a tensor is that tensor); on an unsampled step the data is not even
    searched, and on a sampled one only data holding tensors that require grad reaches the check."""
    import warnings

    import numpy as np

    from kb_tools.watch import hooks
    from kb_tools.watch.checks import Check
    from kb_tools.watch.session import Session
    original_tensor, original_as_tensor = torch.tensor, torch.as_tensor
    seen = []

    class Probe(Check):
        code, name, entry = "KBW999", "copy-probe", "loss-detached-from-graph"

        def on_tensor_copy(self, name, sources, copy, site):
            seen.append((name, len(sources), site))

    w = torch.randn(3, requires_grad=True)
    terms = [(w * 2).sum(), (w * 3).sum()]
    forms = [([1.0, 2.0], {}), ([[1, 2], [3, 4]], {"dtype": torch.float64}), (np.arange(4.0), {}), (3.5, {}),
             (terms, {}), (([terms[0]], [terms[1]]), {}), (w, {}), ([0.5], {"requires_grad": True})]
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    session = Session(checks=[Probe], stop_run=False)
    session.add_model(model)
    session.add_optimizer(opt)
    session.install()
    try:
        assert torch.tensor is not original_tensor
        for data, kwargs in forms:
            for wrapped, original in ((torch.tensor, original_tensor), (torch.as_tensor, original_as_tensor)):
                if original is original_as_tensor and "requires_grad" in kwargs:
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got, want = wrapped(data, **kwargs), original(data, **kwargs)
                assert got.dtype == want.dtype and torch.equal(got.detach(), want.detach())
                assert got.requires_grad == want.requires_grad and (got.grad_fn is None) == (want.grad_fn is None)
        assert torch.as_tensor(w) is w
        sampled = [(name, n) for name, n, _ in seen]
        assert sampled == [("tensor", 2), ("as_tensor", 2), ("tensor", 2), ("as_tensor", 2), ("tensor", 1)], seen
        assert all(site.split(":")[0].endswith("test_watch.py") for _, _, site in seen), seen
        seen.clear()
        with torch.no_grad():
            torch.tensor(terms)
        for _ in range(12):  # past the warmup: step 12 is not sampled
            opt.zero_grad()
            model(torch.randn(2, 3)).sum().backward()
            opt.step()
        assert not session.sampled

        def searched(*args):
            raise AssertionError("data searched on an unsampled step")
        monkeypatch.setattr(hooks, "_grad_tensors", searched)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert torch.equal(torch.tensor(terms), original_tensor([t.item() for t in terms]))
        assert seen == []
    finally:
        session.uninstall()
    assert torch.tensor is original_tensor and torch.as_tensor is original_as_tensor


def test_the_copy_trace_leaves_the_function_mode_stack_as_it_found_it(one_thread):
    """KBW091 follows a copy with a torch function mode from the copy to backward(): the mode is gone
    after the step, a mode the user enters and leaves meanwhile is theirs to pop, no trace starts
    while another mode is active (its exit would pop the trace instead), and a loss copied after its
    backward() (logged) starts none."""
    import warnings

    from torch.overrides import TorchFunctionMode

    from kb_tools.watch.checks.kbw091_loss_term_copied_by_tensor import LossTermCopiedByTensor
    from kb_tools.watch.session import Session

    class Users(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    session = Session(checks=[LossTermCopiedByTensor], stop_run=False)
    session.add_model(model)
    session.add_optimizer(opt)
    session.install()
    check = session.checks[0]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(4):
                out = model(torch.randn(4, 3))
                copied = torch.tensor([out[:, 0].mean(), out[:, 1].mean()])
                assert torch._C._len_torch_function_stack() == 1 and check.trace is not None
                with Users():
                    loss = out.pow(2).mean() + copied.sum()
                assert torch._C._len_torch_function_stack() == 1
                opt.zero_grad()
                loss.backward()
                opt.step()
                assert torch._C._len_torch_function_stack() == 0 and check.trace is None
                torch.tensor([loss, loss])  # logged after the step, no forward since: not followed
                assert torch._C._len_torch_function_stack() == 0 and check.trace is None
            with Users():
                torch.tensor([model(torch.randn(4, 3)).sum()])
                assert torch._C._len_torch_function_stack() == 1 and check.trace is None
    finally:
        session.uninstall()
    assert torch._C._len_torch_function_stack() == 0
    assert [f["code"] for f in session.findings()] == ["KBW091"]


def test_the_causal_probe_reads_the_steps_graph_and_changes_nothing_in_training(one_thread):
    """KBW093 takes a gradient on the step's own graph: the losses and weights of a watched run equal an
    unwatched run's bit for bit, the probe's finding names the unmasked model, and a masked one is silent."""
    from torch import nn

    from kb_tools.watch import watch

    class TinyLM(nn.Module):
        def __init__(self, causal):
            super().__init__()
            self.causal = causal
            self.tok = nn.Embedding(20, 16)
            self.block = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
            self.head = nn.Linear(16, 20)

        def forward(self, ids):
            mask = nn.Transformer.generate_square_subsequent_mask(ids.shape[1]) if self.causal else None
            return self.head(self.block(self.tok(ids), src_mask=mask))

    def run(causal, watched):
        torch.manual_seed(0)
        model = TinyLM(causal)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        handle = watch(model, optimizer, steps=6, every=1, stream=io.StringIO()) if watched else None
        ids = torch.randint(0, 20, (8, 12), generator=torch.Generator().manual_seed(1))
        losses = []
        for _ in range(6):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(ids)[:, :-1].reshape(-1, 20), ids[:, 1:].reshape(-1))
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        codes = [f["code"] for f in handle.findings] if watched else None
        if watched:
            handle.stop()
        return losses, [p.detach().clone() for p in model.parameters()], codes

    plain_losses, plain_weights, _ = run(causal=False, watched=False)
    losses, weights, codes = run(causal=False, watched=True)
    assert losses == plain_losses and all(torch.equal(a, b) for a, b in zip(weights, plain_weights))
    assert "KBW093" in codes
    assert "KBW093" not in run(causal=True, watched=True)[2]


def test_a_float_tensor_reads_as_a_scaled_class_mask_only_when_every_value_is_a_class_id_over_255():
    """KBW099's reading of a batch tensor: class ids divided by 255 (not all 0) give the largest id; a
    NaN, a value of 1.0 (a white pixel: an image, not ids below 255), other fractions, an all-zero
    mask and an integer tensor give nothing."""
    from kb_tools.watch.checks.kbw099_class_masks_scaled_then_truncated import _scaled_mask

    ids = torch.tensor([[0, 1, 3], [2, 0, 1]])
    assert _scaled_mask(ids.float() / 255) == 3
    assert _scaled_mask(torch.tensor([[0.0, 2 / 255], [float("nan"), 1 / 255]])) is None
    assert _scaled_mask(torch.tensor([[0.0, 1.0], [3 / 255, 1 / 255]])) is None
    assert _scaled_mask(torch.tensor([[0.0, 0.3], [0.5, 0.1]])) is None
    assert _scaled_mask(torch.zeros(2, 3)) is None
    assert _scaled_mask(ids) is None


def test_a_uniform_draw_counts_as_a_mask_only_when_its_line_thresholds_it_with_one_probability():
    """The torch.rand / rand_like / uniform_ wrapper passes a draw on as a hand-made dropout mask only
    when the calling line compares it with (or adds it before a floor to) one number between 0 and 1,
    read from the caller's names and instance attributes; a draw compared with a tensor of
    probabilities (sampling), kept as noise or argsorted (random masking), or a coin flip on a line
    that is not a whole statement, is not."""
    from kb_tools.watch.hooks import _mask_threshold

    class Layer:
        def __init__(self):
            self.p, self.kprob = 0.3, 0.7

    self = Layer()  # noqa: F841  (read from this frame by name)
    dropout, probs, n = 0.2, torch.rand(8), 3  # noqa: F841
    lines = {
        "mask = (torch.rand(X.shape) > dropout).float()": 0.2,
        "mask = (torch.rand(x._values().size()) + self.kprob).floor().bool()": 0.7,
        "attn = attn * (torch.rand_like(attn) >= self.p) / (1 - self.p)": 0.3,
        "keep = x.new_empty(n).uniform_() < 1 - self.p": 0.7,
        "y = torch.floor(torch.rand(5) + self.kprob)": 0.7,
        "a = (torch.rand_like(probs) < probs).float()": None,
        "noise = torch.rand(N, L, device=x.device)": None,
        "if torch.rand(1) < 0.5:": None,
        "mask = torch.rand(4) > 1.5": None,
        "scale = torch.rand(4) * dropout": None,
    }
    import linecache
    frame = sys._getframe(0)
    for line, expected in lines.items():
        linecache.cache["<mask-lines>"] = (len(line), None, [line + "\n"], "<mask-lines>")
        fake = type("Frame", (), {"f_code": type("Code", (), {"co_filename": "<mask-lines>"})(), "f_lineno": 1,
                                  "f_locals": frame.f_locals, "f_globals": frame.f_globals})()
        got = _mask_threshold(fake, {})
        assert (got if got is None else round(got, 6)) == expected, line
    linecache.cache.pop("<mask-lines>", None)


def test_a_dropout_that_never_reads_the_mode_is_found_while_training_and_a_gated_one_is_not(one_thread):
    """KBW094 reads the call path of a dropout seen during training: F.dropout with `training` left at its
    default, or a hand-drawn mask, reached from forward() with nothing on the way naming the mode, is
    reported at the dropout's own line; a caller's `if self.training:`, a helper told the mode, and an
    explicit training=True (Monte Carlo dropout) are not."""
    from torch import nn
    from torch.nn import functional as F

    from kb_tools.watch import watch

    def helper_without_mode(x):
        return F.dropout(x, 0.2)

    def helper_told_mode(x, training):
        return F.dropout(x, 0.2) if training else x

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(6, 16), nn.Linear(16, 2)

        def forward(self, x):
            return self.fc2(helper_without_mode(self.fc1(x)))

    class Mask(Net):
        def forward(self, x):
            h = self.fc1(x)
            return self.fc2(h * torch.bernoulli(torch.full_like(h, 0.8)) / 0.8)

    class Explicit(Net):
        def forward(self, x):
            return self.fc2(F.dropout(self.fc1(x), 0.2, training=True))

    class HelperTold(Net):
        def forward(self, x):
            return self.fc2(helper_told_mode(self.fc1(x), self.training))

    class Gated(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            if self.training:
                return self.inner(x)
            return self.inner.fc2(self.inner.fc1(x))

    def findings(model):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        handle = watch(model, optimizer, steps=6, every=1, stream=io.StringIO())
        x, y = torch.randn(8, 6), torch.randint(0, 2, (8,))
        for _ in range(4):
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
        found = [f for f in handle.findings if f["code"] == "KBW094"]
        handle.stop()
        return found

    default = findings(Net())
    assert len(default) == 1 and default[0]["entry"] == "functional-dropout-in-eval"
    line = helper_without_mode.__code__.co_firstlineno + 1
    assert default[0]["where"].endswith(f"test_watch.py:{line}") and default[0]["evidence"]["sampled_steps"] == 4
    mask = findings(Mask())
    assert len(mask) == 1 and mask[0]["evidence"]["kind"] == "a hand-drawn mask"
    for model in (Explicit(), HelperTold(), Gated(Net()), Gated(Mask())):
        assert findings(model) == [], type(model).__name__


def test_split_arrays_are_read_from_tensor_subset_and_numpy_datasets_and_repeated_rows_count_once():
    """KBW096 reads a TensorDataset's tensors, a Subset's rows of its parent's arrays and a dataset's own
    NumPy attributes (not integer arrays, not 1-d ones); the input window a later split repeats from the
    end of the one before is summarized once."""
    np = pytest.importorskip("numpy")
    import torch
    from torch.utils.data import Dataset, Subset, TensorDataset

    from kb_tools.watch.checks.kbw096_scaler_fitted_on_all_splits import _arrays, _new_rows, _Summary

    table = TensorDataset(torch.arange(40.0).reshape(20, 2), torch.arange(20))
    assert [a.shape for a in _arrays(table)] == [(20, 2)]
    (rows,) = _arrays(Subset(table, range(10, 15)))
    assert rows[:, 0].tolist() == [20.0, 22.0, 24.0, 26.0, 28.0]

    class Series(Dataset):
        def __init__(self):
            self.data = np.linspace(0, 1, 30, dtype=np.float32).reshape(10, 3)
            self.ids = np.arange(30).reshape(10, 3)
            self.weights = np.ones(10, dtype=np.float32)

        def __len__(self):
            return 10

    (data,) = _arrays(Series())
    assert data.shape == (10, 3) and float(data.max()) == 1.0

    series = torch.arange(30.0).reshape(15, 2)
    seen: dict = {}
    train = _new_rows([series[:10]], seen)
    later = _new_rows([series[7:]], seen)      # starts 3 rows early, for its first input window
    assert later[0][:, 0].tolist() == [20.0, 22.0, 24.0, 26.0, 28.0]
    summary = _Summary(train + later)
    assert summary.rows == 15 and summary.total.tolist() == series.double().sum(0).tolist()


def test_kbw101_reads_the_softmax_axis_against_the_batch():
    """A softmax over the axis that has the batch's size, and only that axis, is over the batch;
    one sample's (1, C) scores over dim 0 are too; a square (N, N) matrix and other axes are not."""
    import torch

    from kb_tools.watch.checks.kbw101_softmax_over_batch_in_model import batch_axis_softmax

    x = torch.randn(8, 5, requires_grad=True)
    assert batch_axis_softmax(torch.softmax(x, 0).grad_fn, 8)[1:] == (0, (8, 5))
    assert batch_axis_softmax(torch.log_softmax(x.t(), dim=-1).grad_fn, 8)[1:] == (1, (5, 8))
    assert batch_axis_softmax(torch.softmax(x, -1).grad_fn, 8) is None        # over the classes
    assert batch_axis_softmax(torch.softmax(x * 2, 0).grad_fn, 16) is None    # another batch size
    square = torch.randn(8, 8, requires_grad=True)
    assert batch_axis_softmax(torch.softmax(square, 0).grad_fn, 8) is None    # both axes are the batch
    one = torch.randn(1, 4, requires_grad=True)
    assert batch_axis_softmax(torch.softmax(one, 0).grad_fn, 1)[1:] == (0, (1, 4))
    assert batch_axis_softmax(torch.softmax(one, 1).grad_fn, 1) is None
    assert batch_axis_softmax(torch.softmax(torch.randn(3, 5, requires_grad=True), 0).grad_fn, 3) is None  # tiny
    assert batch_axis_softmax(torch.sigmoid(x).grad_fn, 8) is None
    tokens = torch.randn(8 * 11, 8, requires_grad=True)   # (N*T, V) logits whose vocabulary size is N
    assert batch_axis_softmax(torch.log_softmax(tokens, -1).grad_fn, 8) is None


def test_kbw102_reads_an_undivided_mean_at_the_root_of_backward():
    """A mean as the loss returned it (through views, a negation or a GradScaler's power-of-two scale)
    is undivided; any other constant factor, a sum-reduced loss or an unknown root is not judged."""
    import torch
    import torch.nn.functional as F

    from kb_tools.watch.checks.kbw102_accumulated_means_not_divided import undivided_mean

    logits, y = torch.randn(8, 3, requires_grad=True), torch.randint(0, 3, (8,))
    x = torch.randn(8, requires_grad=True)
    assert undivided_mean(F.cross_entropy(logits, y).grad_fn)
    assert undivided_mean((x ** 2).mean().grad_fn) and undivided_mean((-(x.mean())).grad_fn)
    assert undivided_mean((F.mse_loss(x, torch.zeros(8)) * torch.tensor(65536.0)).grad_fn)  # scaled, not divided
    assert not undivided_mean((F.cross_entropy(logits, y) / 4).grad_fn)
    assert not undivided_mean((F.cross_entropy(logits, y) * 0.25 * 65536.0).grad_fn)
    assert not undivided_mean(F.cross_entropy(logits, y, reduction="sum").grad_fn)
    assert not undivided_mean(x.sum().grad_fn)


def test_kbw102_counts_a_micro_batch_only_after_a_new_batch_of_the_same_loader():
    from kb_tools.watch.checks.accumulation import new_batch

    assert new_batch((3, 7, 3), (4, 7, 4))            # the next batch of the same loader
    assert not new_batch((3, 7, 3), (3, 7, 3))        # a second loss of the same forward
    assert not new_batch((3, 7, 3), (4, 8, 4))        # another task's loader
    assert new_batch((0, None, 5), (0, None, 6))      # no loader: a new call of the model
    assert not new_batch((0, None, 5), (0, None, 5))


def test_kbw103_reads_a_token_mean_divided_by_the_number_of_micro_batches():
    import torch
    import torch.nn.functional as F

    from kb_tools.watch.checks.kbw103_accumulated_token_means import divided_token_mean

    logits, y = torch.randn(12, 5, requires_grad=True), torch.randint(0, 5, (12,))
    y[:4] = -100
    assert divided_token_mean((F.cross_entropy(logits, y) / 4).grad_fn) == 4
    assert divided_token_mean((F.cross_entropy(logits, y) * 0.125).grad_fn) == 8
    seq = torch.randn(2, 5, 6, requires_grad=True)   # (N, C, T) logits: the 2-D form of the loss
    assert divided_token_mean((F.cross_entropy(seq, torch.randint(0, 5, (2, 6))) / 2).grad_fn) == 2
    assert divided_token_mean(F.cross_entropy(logits, y).grad_fn) is None                    # not divided
    assert divided_token_mean((F.cross_entropy(logits, y, reduction="sum") / 4).grad_fn) is None  # a total
    assert divided_token_mean((F.mse_loss(logits, torch.zeros(12, 5)) / 4).grad_fn) is None     # not a token loss
