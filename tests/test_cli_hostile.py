"""The command line where its surroundings are odd: a full disk, a closed stdout, a queries file
with odd values, a working directory inside another checkout, the installed package's own copy."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kb_tools import cli
from kb_tools.core import locate
from kbfactory import entry, make_kb, write_entry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(args, cwd=ROOT, stdout=subprocess.PIPE, shell_suffix="", tmp=None):
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("KB_PATH", None)
    if tmp is not None:
        env["KB_CACHE_DIR"] = str(tmp / "cache")
    if shell_suffix:
        cmd = " ".join([sys.executable, "-m", "kb_tools", *args]) + shell_suffix
        return subprocess.run(["sh", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    return subprocess.run([sys.executable, "-m", "kb_tools", *args], cwd=cwd, env=env, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=120)


@pytest.mark.parametrize("args", [["list"], ["search", "loss", "flat"], ["check"]])
def test_output_to_a_full_disk_is_one_line(tmp_path, args):
    kb_dir = str(make_kb(tmp_path))
    with open("/dev/full", "w") as full:
        r = run(["--kb", kb_dir, *args], stdout=full, tmp=tmp_path)
    assert r.returncode == 1 and r.stderr == "kb: cannot write the output: No space left on device\n", r.stderr


def test_a_closed_stdout_is_one_line(tmp_path):
    kb_dir = str(make_kb(tmp_path))
    r = run(["--kb", kb_dir, "search", "loss"], shell_suffix=" >&-", tmp=tmp_path)
    assert r.returncode == 1 and r.stderr == "kb: standard output is closed; nothing to write to\n", r.stderr


@pytest.mark.parametrize("kind", ["2020-01-01", "!!binary aGVsbG8=", "[a, b]", "3"])
def test_eval_with_a_kind_that_is_not_text(tmp_path, capsys, kind):
    kb_dir = make_kb(tmp_path)
    queries = tmp_path / "q.yaml"
    queries.write_text(f"queries:\n  - query: loss flat\n    expect: [alpha-bug]\n    kind: {kind}\n")
    assert cli.main(["--kb", str(kb_dir), "eval", str(queries), "--json"]) == 1
    err = capsys.readouterr().err
    assert "query #1: `kind` must be text" in err and len(err.strip().splitlines()) == 1


def test_eval_without_a_queries_file_says_what_to_pass(tmp_path, capsys):
    kb_dir = make_kb(tmp_path)
    assert cli.main(["--kb", str(kb_dir), "eval"]) == 1
    err = capsys.readouterr().err
    assert "no labelled queries at" in err and "kb eval QUERIES.yaml" in err
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "queries.yaml").write_text("queries:\n  - {query: loss flat, expect: [alpha-bug]}\n")
    assert cli.main(["--kb", str(kb_dir), "eval"]) == 0  # the checkout's own set, beside its kb/
    assert "1 queries: hit@1 1.000" in capsys.readouterr().out


def test_the_kb_is_found_upward_from_the_working_directory(tmp_path):
    make_kb(tmp_path)
    inside = tmp_path / "kb" / "entries" / "loss"
    r = run(["list", "--json"], cwd=str(inside), tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(e["id"] for e in json.loads(r.stdout)) == ["alpha-bug", "beta-bug"]
    write_entry(tmp_path, entry("broken-here", see_also=["nope"]))
    r = run(["check"], cwd=str(tmp_path), tmp=tmp_path)
    assert r.returncode == 1 and "broken-here.yaml" in r.stdout


def test_the_installed_copy_is_never_written(tmp_path, capsys, monkeypatch):
    kb_dir = make_kb(tmp_path)
    src = tmp_path / "notes.txt"
    src.write_text("some notes\n")
    monkeypatch.setattr(locate, "bundled_kb", lambda path: True)
    assert cli.main(["--kb", str(kb_dir), "evidence", "add", str(src), "--id", "notes"]) == 1
    assert "installed with the package is never written" in capsys.readouterr().err
    assert not (tmp_path / "evidence" / "notes.md").exists()


def test_bundled_kb_names_only_the_package_data():
    from kb_tools import PACKAGE_DIR as package
    assert locate.bundled_kb(os.path.join(package, "_data", "kb"))
    assert not locate.bundled_kb(os.path.join(ROOT, "kb")) and not locate.bundled_kb(package)


def test_makefile_run_installs_the_pinned_torch():
    makefile = open(os.path.join(ROOT, "Makefile"), encoding="utf-8").read()
    install = makefile.split("\ninstall:", 1)[1].split("\n\n", 1)[0]
    assert '"$(TORCH_PIN)"' in install and "TORCH_PIN := torch==2.13.0" in makefile


@pytest.mark.parametrize("value", ["not a date", "2024-13-01", "2024-02-30", "24-01-01", "2024-01-01T10:00", ""])
def test_evidence_add_refuses_a_published_value_that_is_not_a_date(tmp_path, capsys, value):
    kb_dir = make_kb(tmp_path)
    page = tmp_path / "page.txt"
    page.write_text("words of a source\n")
    argv = ["--kb", str(kb_dir), "evidence", "add", str(page), "--id", "new-source", "--published"]
    code = cli.main([*argv, value])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--published" in err and "YYYY-MM-DD" in err, err
    assert not (tmp_path / "evidence" / "new-source.md").exists()
    assert cli.main([*argv, "2024-02-29"]) == 0 and "\npublished: 2024-02-29\n" in \
        (tmp_path / "evidence" / "new-source.md").read_text()
