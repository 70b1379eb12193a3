"""`kb run ID`: an entry's snippet run the way its test runs it."""
from __future__ import annotations

import importlib.util
import subprocess

from kb_tools import cli
from kbfactory import entry, make_kb, write_entry


def test_run_executes_the_snippet_and_passes_its_output_through(tmp_path, capfd):
    kb_dir = make_kb(tmp_path)
    assert cli.main(["--kb", str(kb_dir), "run", "alpha-bug", "--device", "cpu"]) == 0
    assert "grad of 2x is 2.0" in capfd.readouterr().out


def test_a_failing_snippet_is_exit_1_naming_the_entry(tmp_path, capfd):
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("fails-here", snippet="import sys\nprint('before')\nsys.exit(3)\n"))
    assert cli.main(["--kb", str(kb_dir), "run", "fails-here"]) == 1
    out, err = capfd.readouterr()
    assert "before" in out
    assert err.strip() == "kb: the snippet of fails-here exited with status 3 (kb/entries/loss/fails-here.yaml)"


def test_distributed_snippets_run_under_torchrun(tmp_path, monkeypatch):
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("two-ranks", launch="torchrun"))
    seen = {}

    def fake_run(cmd, **kwargs):
        seen["cmd"], seen["env"] = cmd, kwargs["env"]
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert cli.main(["--kb", str(kb_dir), "run", "two-ranks", "--device", "cpu"]) == 0
    assert seen["cmd"][1:4] == ["-m", "torch.distributed.run", "--standalone"]
    assert "--nproc-per-node=2" in seen["cmd"] and seen["env"]["CUDA_VISIBLE_DEVICES"] == ""


def test_run_without_torch_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    kb_dir = make_kb(tmp_path)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert cli.main(["--kb", str(kb_dir), "run", "alpha-bug"]) == 1
    err = capsys.readouterr().err
    assert "torch is not installed" in err and "pip install torch==2.13.0" in err
    assert len(err.strip().splitlines()) == 1
