"""The snippet runner: device control, timeouts, and failures reported at the YAML line."""
from __future__ import annotations

import textwrap

from kb_tools import snippets
from kb_tools.load import load_kb
from kbfactory import entry, make_kb

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


def test_cpu_run_pins_generic_kernels_on_x86(tmp_path, monkeypatch):
    """Figures must print the same bits on any x86 CPU: the CPU run asks torch, MKL and oneDNN for
    their generic code paths (a value the user set is kept)."""
    import platform
    import pytest
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("the kernel pins are for x86 machines")
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    monkeypatch.setenv("MKL_CBWR", "AUTO")
    e = load_entry(tmp_path, snippet=(
        "import os\nimport torch\n"
        "print(os.environ['MKL_CBWR'], os.environ['ONEDNN_MAX_CPU_ISA'],"
        " torch.backends.cpu.get_cpu_capability())\n"))
    run = snippets.run_snippet(e, "cpu", timeout=120)
    assert run.passed and run.summary() == "AUTO SSE41 DEFAULT"
    assert snippets.child_env("cuda").get("ATEN_CPU_CAPABILITY") is None  # a GPU run keeps its kernels


def test_timeout_is_reported_not_raised(tmp_path):
    e = load_entry(tmp_path, snippet="import time\nprint('started', flush=True)\ntime.sleep(30)\n")
    run = snippets.run_snippet(e, "cpu", timeout=2)
    assert run.timed_out and not run.passed and run.seconds < 20


def test_cuda_is_skipped_with_a_reason_without_a_gpu(tmp_path):
    import torch
    e = load_entry(tmp_path)
    reason = snippets.device_skip_reason(e, "cuda")
    assert (reason is None) == torch.cuda.is_available()
    assert snippets.device_skip_reason(e, "cpu") is None


def test_torchrun_entries_launch_two_processes(tmp_path):
    code = textwrap.dedent("""\
        import os
        def main():
            print("rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"])
        if __name__ == "__main__":
            main()
        """)
    e = load_entry(tmp_path, snippet=code, launch="torchrun")
    run = snippets.run_snippet(e, "cpu", timeout=120)
    assert run.passed, run.stderr
    assert "rank 0 of 2" in run.stdout and "rank 1 of 2" in run.stdout
