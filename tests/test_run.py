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

    class FakePopen:
        def __init__(self, cmd, **kwargs):
            seen["cmd"], seen["env"] = cmd, kwargs["env"]
            self.stdout, self.returncode = iter(["ranks done\n"]), 0

        def wait(self):
            return 0

    monkeypatch.setattr(subprocess, "Popen", FakePopen)
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


FIGURES = "print('figure spikes: 7')\nprint('figure ratio: 12x')\nprint('done')\n"


def test_run_shows_each_figure_beside_the_entrys_claim(tmp_path, capfd):
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("has-figures", snippet=FIGURES, figures={"spikes": "at least 2", "ratio": "10-20x"},
                                cause="Spikes: at least 2, and a 10-20x ratio."))
    assert cli.main(["--kb", str(kb_dir), "run", "has-figures"]) == 0
    out, err = capfd.readouterr()
    assert out.splitlines() == ["figure spikes: 7", "figure ratio: 12x", "done"]
    assert "spikes  7  (claim: at least 2)  holds" in err and "ratio   12x  (claim: 10-20x)  holds" in err


def test_a_figure_outside_its_claim_here_is_exit_1_and_says_so(tmp_path, capfd):
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("has-figures", snippet=FIGURES, figures={"spikes": "at least 9", "ratio": "10-20x"},
                                cause="Spikes: at least 9, and a 10-20x ratio."))
    assert cli.main(["--kb", str(kb_dir), "run", "has-figures"]) == 1
    err = capfd.readouterr().err
    assert "spikes  7  (claim: at least 9)  does not hold" in err
    assert err.strip().splitlines()[-1].startswith("kb: has-figures: spikes measured outside the entry's claim")
