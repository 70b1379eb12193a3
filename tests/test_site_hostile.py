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
    from kb_tools import locate
    kb_dir = make_kb(tmp_path)
    monkeypatch.setattr(locate, "bundled_kb", lambda path: True)
    code = cli.main(["--kb", str(kb_dir), "build", "--out", str(tmp_path / "o"), "--work", str(tmp_path / "w")])
    err = capsys.readouterr().err
    assert code == 1 and "inside the installed package" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists() and not (tmp_path / "w").exists()


def test_project_root_prefers_the_checkout_being_worked_in(tmp_path, monkeypatch):
    from kb_tools import site
    (tmp_path / "site_templates").mkdir()
    (tmp_path / "mkdocs.yml").write_text("site_name: x\n")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert site.project_root() == str(tmp_path)
