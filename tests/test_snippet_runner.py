"""The snippet runner: device control, timeouts, and failures reported at the YAML line."""
from __future__ import annotations

import textwrap

import pytest

from kb_tools.snippets import runner as snippets
from kb_tools.core.load import load_kb
from kbfactory import entry, make_kb, rank_one_misbehaves_once

FAILING = textwrap.dedent("""\
    import os
    import torch
    x = torch.ones(3)
    assert x.sum().item() == 4.0, "planted failure"
    """)


def load_entry(tmp_path, **fields):
    make_kb(tmp_path, entries=[entry("runner-case", **fields)])
    return load_kb(str(tmp_path / "kb"), use_cache=False).entries["runner-case"]


def test_failure_points_at_the_yaml_line(tmp_path):
    e = load_entry(tmp_path, snippet=FAILING)
    run = snippets.run_snippet(e, "cpu", timeout=120)
    assert not run.passed and run.returncode == 1
    line = snippets.failing_line(run)
    yaml_lines = (tmp_path / e.path).read_text().splitlines()
    assert "planted failure" in yaml_lines[line - 1]
    assert f'File "{e.path}", line {line}' in run.stderr and "kb-snippet-" not in run.stderr


def test_cpu_run_hides_every_gpu(tmp_path):
    e = load_entry(tmp_path, snippet="import os\nprint(repr(os.environ['CUDA_VISIBLE_DEVICES']))\n")
    run = snippets.run_snippet(e, "cpu", timeout=60)
    assert run.passed and run.summary() == "''"


def test_cpu_run_keeps_the_users_kernel_path(tmp_path, monkeypatch):
    """No kernel path is pinned: the test runs what a user's shell runs (the figures are stated to
    hold on any path); a capability the user asks for is kept."""
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    assert "ATEN_CPU_CAPABILITY" not in snippets.child_env("cpu")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    e = load_entry(tmp_path, snippet="import torch\nprint(torch.backends.cpu.get_cpu_capability())\n")
    run = snippets.run_snippet(e, "cpu", timeout=120)
    assert run.passed and run.summary() == "DEFAULT", run.stderr


def test_a_busy_snippet_is_stopped_by_its_cpu_time(tmp_path):
    e = load_entry(tmp_path, snippet="print('started', flush=True)\nwhile True:\n    pass\n")
    run = snippets.run_snippet(e, "cpu", timeout=2)
    assert run.timed_out and not run.passed and run.returncode is None
    assert run.summary() == "started"


def test_a_snippet_that_hangs_without_cpu_is_stopped_by_the_wall_backstop(tmp_path):
    e = load_entry(tmp_path, snippet="import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    run = snippets.run_snippet(e, "cpu", timeout=30, wall_timeout=2)
    assert run.timed_out and not run.passed and run.seconds < 20 and run.summary() == "started"
    assert snippets.wall_backstop(30) >= 300  # the default backstop is far above any CPU-bound run


def test_cuda_is_skipped_with_a_reason_without_a_gpu(tmp_path):
    import torch
    e = load_entry(tmp_path)
    reason = snippets.device_skip_reason(e, "cuda")
    assert (reason is None) == torch.cuda.is_available()
    assert snippets.device_skip_reason(e, "cpu") is None


@pytest.mark.parametrize("fork", ["1", "0"], ids=["forked-ranks", "torchrun"])
def test_torchrun_entries_launch_two_processes(tmp_path, monkeypatch, fork):
    """Both ways a torchrun snippet runs: two ranks forked from the warm server, and torchrun itself."""
    monkeypatch.setenv(snippets.FORK_SERVER_VAR, fork)
    # each rank writes its line in one os.write: the ranks share the pipe, and print()'s pieces interleave
    code = textwrap.dedent("""\
        import os
        def main():
            os.write(1, ("rank " + os.environ["RANK"] + " of " + os.environ["WORLD_SIZE"] + "\\n").encode())
        if __name__ == "__main__":
            main()
        """)
    e = load_entry(tmp_path, snippet=code, launch="torchrun")
    run = snippets.run_snippet(e, "cpu", timeout=120)
    assert run.passed, run.stderr
    assert "rank 0 of 2" in run.stdout and "rank 1 of 2" in run.stdout


# Rank 1 dies the way gloo's ranks sometimes do at exit on torch 2.13 CPU: the work done and printed,
# then the C++ message and SIGABRT.
def exit_abort_snippet(mark, always: bool = False) -> str:
    return rank_one_misbehaves_once(mark, """\
        sys.stderr.write("terminate called without an active exception\\n")
        sys.stderr.flush()
        os.abort()
        """, always)


def test_a_torchrun_exit_abort_is_retried_once(tmp_path):
    e = load_entry(tmp_path, snippet=exit_abort_snippet(tmp_path / "mark"), launch="torchrun")
    run = snippets.run_snippet(e, "cpu", timeout=120)
    assert run.passed and run.exit_aborts == 1 and run.summary() == "work done", run.stderr[-500:]


def test_an_exit_abort_every_time_still_fails(tmp_path):
    e = load_entry(tmp_path, snippet=exit_abort_snippet(tmp_path / "mark", always=True), launch="torchrun")
    run = snippets.run_snippet(e, "cpu", timeout=120)
    assert not run.passed and run.exit_aborts == 1


def test_a_failing_assert_is_not_taken_for_an_exit_abort(tmp_path):
    e = load_entry(tmp_path, snippet=exit_abort_snippet(tmp_path / "mark").replace(
        "    print('work done', flush=True)\n", "    assert False, 'planted'\n"), launch="torchrun")
    run = snippets.run_snippet(e, "cpu", timeout=120)
    assert not run.passed and run.exit_aborts == 0 and "planted" in run.stderr
