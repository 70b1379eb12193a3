"""`kb build` and `kb serve` with folders and addresses a user gets wrong: one line, exit 1, the KB
untouched; `kb serve` says where it serves."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from kb_tools import cli
from kbfactory import make_kb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def snapshot(tmp_path):
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if "cache" not in p.parts)


@pytest.mark.parametrize("flag, where", [
    ("--work", "kb/entries"), ("--work", "kb/entries/loss/new"), ("--out", "kb"),
    ("--out", "kb/quotes/site"), ("--work", "evidence/pages"),
])
def test_build_refuses_folders_inside_the_kb(tmp_path, capsys, monkeypatch, flag, where):
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    kb_dir = make_kb(tmp_path)
    before = snapshot(tmp_path)
    other = "--out" if flag == "--work" else "--work"
    code = cli.main(["--kb", str(kb_dir), "build", flag, str(tmp_path / where), other, str(tmp_path / "elsewhere")])
    err = capsys.readouterr().err
    assert code == 1 and "inside the KB" in err and len(err.strip().splitlines()) == 1, err
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("addr, message", [
    ("127.0.0.1:99999", "port from 1 to 65535"),
    ("127.0.0.1", "expected HOST:PORT"),
    ("127.0.0.1:http", "expected HOST:PORT"),
])
def test_serve_with_a_bad_address_is_one_line(tmp_path, capsys, addr, message):
    kb_dir = make_kb(tmp_path)
    assert cli.main(["--kb", str(kb_dir), "serve", "--dev-addr", addr, "--work", str(tmp_path / "w")]) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "w").exists()


def test_serve_on_a_busy_port_is_one_line(tmp_path, capsys):
    kb_dir = make_kb(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = cli.main(["--kb", str(kb_dir), "serve", "--dev-addr", f"127.0.0.1:{port}",
                         "--work", str(tmp_path / "w")])
    err = capsys.readouterr().err
    assert code == 1 and f"cannot serve on 127.0.0.1:{port}" in err and "in use" in err, err
    assert len(err.strip().splitlines()) == 1


def test_serve_prints_its_url(tmp_path):
    kb_dir = make_kb(tmp_path)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "KB_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "kb_tools", "--kb", str(kb_dir), "serve", "--dev-addr",
                             f"127.0.0.1:{port}", "--work", str(tmp_path / "w")], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, first = time.monotonic() + 60, ""
        os.set_blocking(proc.stderr.fileno(), False)
        while time.monotonic() < deadline and not first:
            first = proc.stderr.readline() or ""
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        assert first.startswith(f"kb serve: http://127.0.0.1:{port}/"), first + (proc.stderr.read() or "")
    finally:
        proc.terminate()
        proc.wait(20)


def test_build_never_writes_into_the_installed_package(tmp_path, capsys, monkeypatch):
    from kb_tools.core import locate
    kb_dir = make_kb(tmp_path)
    monkeypatch.setattr(locate, "bundled_kb", lambda path: True)
    code = cli.main(["--kb", str(kb_dir), "build", "--out", str(tmp_path / "o"), "--work", str(tmp_path / "w")])
    err = capsys.readouterr().err
    assert code == 1 and "inside the installed package" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists() and not (tmp_path / "w").exists()


def test_project_root_prefers_the_checkout_being_worked_in(tmp_path, monkeypatch):
    from kb_tools.site import build as site
    (tmp_path / "site_templates").mkdir()
    (tmp_path / "mkdocs.yml").write_text("site_name: x\n")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert site.project_root() == str(tmp_path)


def site_files(out):
    return sorted(str(p.relative_to(out)) for p in out.rglob("*"))


def test_an_interrupted_build_leaves_the_previous_site_whole(tmp_path, capsys, monkeypatch):
    """Ctrl-C during a build: the site is built aside and swapped in at the end, so the one
    already there stays, every file of it, and nothing of the build is left behind."""
    from kb_tools.site import build as site
    kb_dir = make_kb(tmp_path / "k")
    out, work = tmp_path / "out", tmp_path / "work"
    argv = ["--kb", str(kb_dir), "build", "--out", str(out), "--work", str(work)]
    assert cli.main(argv) == 0
    before = {name: (out / name).read_bytes() for name in site_files(out) if (out / name).is_file()}
    assert "llms.txt" in before and "md/alpha-bug.md" in before and "index.html" in before

    def interrupted(kb, out_dir, results=None):
        raise KeyboardInterrupt  # after mkdocs has written its pages: the last step of a build

    monkeypatch.setattr(site, "write_agent_files", interrupted)
    assert cli.main(argv) == 130
    capsys.readouterr()
    assert {name: (out / name).read_bytes() for name in site_files(out) if (out / name).is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k", "out", "work"]  # no temporary folder left


def test_a_build_keeps_the_site_folder_readable(tmp_path):
    """Built in a temporary folder: the site must not keep a temporary folder's owner-only mode."""
    kb_dir = make_kb(tmp_path / "k")
    assert cli.main(["--kb", str(kb_dir), "build", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "w")]) == 0
    assert (tmp_path / "out").stat().st_mode & 0o055 == 0o055 & ~current_umask()


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("shared_work", [True, False])
def test_parallel_builds_into_one_folder_give_a_whole_site(tmp_path, shared_work):
    """Builds started together in one checkout: each one succeeds, or says in one line that another
    build holds the work folder, and the site left is complete, with no temporary folder beside it."""
    kb_dir = make_kb(tmp_path / "k")
    out = tmp_path / "out"
    env = {**os.environ, "KB_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("KB_PATH", None)
    reference = tmp_path / "reference"
    build = lambda o, w: [sys.executable, "-m", "kb_tools", "--kb", str(kb_dir), "build",  # noqa: E731
                          "--out", str(o), "--work", str(w)]
    assert subprocess.run(build(reference, tmp_path / "w-ref"), env=env, cwd=ROOT, capture_output=True).returncode == 0
    procs = [subprocess.Popen(build(out, tmp_path / ("w" if shared_work else f"w{n}")), env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in range(3)]
    results = [(p.wait(120), *p.communicate()) for p in procs]
    ok = [r for r in results if r[0] == 0]
    refused = [r for r in results if r[0] != 0]
    assert ok, results
    for code, _, err in refused:
        assert shared_work and code == 1 and len(err.strip().splitlines()) == 1 and "another kb build" in err, err
    if not shared_work:
        assert not refused, results
    assert site_files(out) == site_files(reference)
    assert (out / "llms.txt").read_text() == (reference / "llms.txt").read_text()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".") or "kb-" in p.name) == []
