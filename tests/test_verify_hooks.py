"""The pre-commit hooks another repository runs: well-formed, and their commands pass on this KB."""
from __future__ import annotations

import os
import shlex

import pytest
import yaml

from kb_tools import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _hooks():
    with open(os.path.join(ROOT, ".pre-commit-hooks.yaml"), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def test_hooks_file_has_what_pre_commit_needs():
    hooks = _hooks()
    assert {h["id"] for h in hooks} >= {"kb-verify"}
    for hook in hooks:
        assert {"id", "name", "entry", "language"} <= set(hook), hook
        assert hook["language"] == "python"
        # whole-KB checks take no file names; the lint hook is given the staged Python files
        assert hook.get("pass_filenames", True) is (hook["id"] == "kb-lint"), hook
        assert shlex.split(hook["entry"])[0] == "kb"  # the console script pyproject.toml installs


def test_verify_hook_command_passes_here_and_fails_on_a_misquote(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(ROOT)
    entry = next(h["entry"] for h in _hooks() if h["id"] == "kb-verify")
    assert cli.main(shlex.split(entry)[1:]) == 0
    # the same command on a copy with one word changed fails
    import shutil
    shutil.copytree(os.path.join(ROOT, "kb", "quotes"), tmp_path / "kb" / "quotes")
    shutil.copytree(os.path.join(ROOT, "evidence"), tmp_path / "evidence")
    (tmp_path / "kb" / "entries").mkdir()
    path = tmp_path / "kb" / "quotes" / "karpathy-recipe-2019.yaml"
    path.write_text(path.read_text().replace("patience and attention", "patience and devotion"))
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert cli.main(shlex.split(entry)[1:]) == 1
    assert "swapped 'attention' -> 'devotion'" in capsys.readouterr().out


def test_lint_hook_command_flags_a_staged_script(tmp_path, capsys):
    entry = next(h for h in _hooks() if h["id"] == "kb-lint")
    assert entry["types"] == ["python"]
    script = tmp_path / "train.py"
    script.write_text("for x, y in loader:\n    loss = f(model(x), y)\n    loss.backward()\n"
                      "    opt.zero_grad()\n    opt.step()\n")
    assert cli.main([*shlex.split(entry["entry"])[1:], str(script)]) == 1
    assert "KBL005" in capsys.readouterr().out
