"""The `kb` command line: exit codes, one-line errors, the JSON contract, --kb, pipes."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile

import pytest

from kbfactory import entry, make_kb, write_entry

from kb_tools.core.load import load_kb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kb(*args, env=None, cwd=ROOT, stdin=None):
    full_env = {k: v for k, v in os.environ.items() if k != "KB_PATH"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "kb_tools", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd, input=stdin)


@pytest.fixture
def fixture_kb(tmp_path):
    return str(make_kb(tmp_path))


def test_search_json_contract(fixture_kb):
    r = kb("--kb", fixture_kb, "search", "loss flat", "--json")
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)  # nothing but the array on stdout
    assert isinstance(hits, list) and hits
    for hit in hits:
        assert {"id", "title", "area", "score"} <= set(hit)
        assert isinstance(hit["score"], (int, float))
    assert hits[0]["id"] == "alpha-bug"
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_search_limit_area_and_tag_filters(fixture_kb):
    r = kb("--kb", fixture_kb, "search", "loss", "--json", "--area", "numerics")
    assert {h["area"] for h in json.loads(r.stdout)} == {"numerics"}
    r = kb("--kb", fixture_kb, "search", "loss", "--json", "--limit", "1")
    assert len(json.loads(r.stdout)) == 1
    tag = next(t for e in load_kb(fixture_kb, use_cache=False).entries.values() for t in e.tags)
    r = kb("--kb", fixture_kb, "search", "loss", "--json", "--tag", tag.upper())
    assert r.returncode == 0 and json.loads(r.stdout) and all(tag in load_kb(fixture_kb).entries[h["id"]].tags
                                                               for h in json.loads(r.stdout))
    r = kb("--kb", fixture_kb, "search", "loss", "--json", "--tag", "no-such-tag")
    assert r.returncode == 2 and r.stdout == "" and r.stderr.startswith("kb: unknown tag 'no-such-tag'")
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, code, message", [
    (["search", ""], 2, "empty query"),
    (["search", "   "], 2, "empty query"),
    (["search", "x" * 20_001], 2, "limit is"),
    (["search", "loss", "--area", "nowhere"], 2, "invalid choice"),
    (["search", "loss", "--limit", "0"], 2, "--limit"),
    (["show", "nope"], 1, "unknown entry 'nope'"),
    (["snippet", "alpha-bgu"], 1, "did you mean 'alpha-bug'"),
    (["frobnicate"], 2, "invalid choice"),
])
def test_user_mistakes_get_one_line_and_exit_code(fixture_kb, args, code, message):
    r = kb("--kb", fixture_kb, *args)
    assert r.returncode == code
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_show_suggests_close_id(fixture_kb):
    r = kb("--kb", fixture_kb, "show", "alpha-bgu")
    assert r.returncode == 1
    assert r.stderr.strip() == "kb: unknown entry 'alpha-bgu' (did you mean 'alpha-bug'?)"


def test_show_by_alias_and_json(fixture_kb):
    r = kb("--kb", fixture_kb, "show", "a1", "--json")
    assert r.returncode == 0
    data = json.loads(r.stdout)
    assert data["id"] == "alpha-bug" and data["symptoms"][0] == "loss is flat from the first step"
    human = kb("--kb", fixture_kb, "show", "alpha-bug").stdout
    assert human.index("Symptoms") < human.index("Why it happens") < human.index("Fix")


def test_snippet_pipes_into_python(fixture_kb):
    code = kb("--kb", fixture_kb, "snippet", "alpha-bug").stdout
    assert code.startswith("import torch")
    ran = subprocess.run([sys.executable], input=code, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert "grad of 2x is 2.0" in ran.stdout


def test_snippet_prints_exactly_what_the_test_runs():
    from kb_tools.core.load import load_kb
    from kb_tools.snippets.runner import script_text
    entries = list(load_kb(use_cache=False).entries.values())
    assert entries
    for e in entries[:3]:
        assert kb("snippet", e.id).stdout == script_text(e)


def test_kb_path_env_and_flag_select_a_second_kb(tmp_path, fixture_kb):
    other = tmp_path / "other"
    write_entry(other, entry("private-bug", symptoms=["our private loss flat symptom", "b two", "c three"]))
    for args, env in ((["--kb", str(other / "kb")], None), ([], {"KB_PATH": str(other / "kb")})):
        r = kb(*args, "list", "--json", env=env)
        assert r.returncode == 0, r.stderr
        assert [e["id"] for e in json.loads(r.stdout)] == ["private-bug"]
    r = kb("--kb", str(tmp_path / "missing"), "list")
    assert r.returncode == 1 and "not a KB directory" in r.stderr


def test_broken_kb_file_is_one_line_error_naming_the_file(tmp_path):
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, {"id": "bad"}, raw="id: [unclosed\n")
    r = kb("--kb", str(kb_dir), "search", "loss")
    assert r.returncode == 1
    assert "kb/entries/loss/bad.yaml:" in r.stderr and "KB001" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = kb("--kb", str(kb_dir), "check")
    assert r.returncode == 1 and "KB001" in r.stdout


@pytest.mark.parametrize("where", ["kb/entries/loss/gone.yaml", "evidence/gone.md"])
def test_dangling_link_in_the_kb_is_a_problem_not_a_traceback(tmp_path, where):
    kb_dir = make_kb(tmp_path)
    os.symlink(tmp_path / "nowhere", tmp_path / where)
    for env in ({"KB_CACHE_DIR": str(tmp_path / "cache")}, {"KB_NO_CACHE": "1"}):
        r = kb("--kb", str(kb_dir), "check", env=env)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert f"{where}: KB001 cannot read" in r.stdout


def test_check_clean_kb(fixture_kb):
    r = kb("--kb", fixture_kb, "check")
    assert r.returncode == 0 and r.stdout.startswith("ok: 2 entries")


def test_no_colour_when_piped_or_no_color(fixture_kb, monkeypatch):
    r = kb("--kb", fixture_kb, "search", "loss flat")
    assert "\x1b[" not in r.stdout and "alpha-bug" in r.stdout
    from kb_tools.commands.output import use_colour

    class Terminal:
        def isatty(self):
            return True
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert use_colour(Terminal())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_colour(Terminal())


@pytest.mark.parametrize("args", [["search", "loss flat"], ["search", "loss flat", "--json", "-n", "3"],
                                  ["show", "alpha-bug"], ["snippet", "alpha-bug"]])
def test_search_path_imports_no_heavy_modules(fixture_kb, tmp_path, args):
    """torch, jinja2, mkdocs and mcp never; a cached search not even re, argparse or json (start-up cost)."""
    quick = args[0] == "search"
    probe = ("import sys, io, contextlib\n"
             "from kb_tools.cli import main\n"
             f"with contextlib.redirect_stdout(io.StringIO()): rc = main({['--kb', fixture_kb, *args]!r})\n"
             f"banned = ('torch', 'jinja2', 'mkdocs', 'mcp') + (('re', 'argparse', 'json') if {quick} else ())\n"
             "bad = [m for m in banned if m in sys.modules]\n"
             "assert rc == 0 and not bad, (rc, bad)\nprint('clean')")
    env = {**os.environ, "KB_CACHE_DIR": str(tmp_path / "cache")}
    subprocess.run([sys.executable, "-m", "kb_tools", "--kb", fixture_kb, *args], capture_output=True, env=env)
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 0 and "clean" in r.stdout, r.stderr


@pytest.mark.parametrize("extra", [[], ["--lexical"], ["--json", "-n", "3"]])
def test_a_cached_search_imports_neither_the_cli_nor_the_parser(fixture_kb, tmp_path, extra):
    """bin/kb's launcher runs a plain search without cli.py, load.py (the YAML parser and the
    schema) or model.py: the start-up cost the lexical path is measured on."""
    args = ["--kb", fixture_kb, "search", "loss flat", *extra]
    probe = ("import sys, io, contextlib\n"
             f"sys.argv = ['kb', *{args!r}]\n"
             "from kb_tools.launcher import launch\n"
             "with contextlib.redirect_stdout(io.StringIO()) as out: rc = launch()\n"
             "banned = ('kb_tools.cli', 'kb_tools.core.load', 'kb_tools.core.model', 'argparse', 're', 'json', 'yaml')\n"
             "bad = [m for m in banned if m in sys.modules]\n"
             "assert rc == 0 and 'alpha-bug' in out.getvalue() and not bad, (rc, bad)\nprint('clean')")
    env = {**os.environ, "KB_CACHE_DIR": str(tmp_path / "cache")}
    subprocess.run([sys.executable, "-m", "kb_tools", *args], capture_output=True, env=env)  # builds the cache
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 0 and "clean" in r.stdout, r.stderr


@pytest.mark.parametrize("argv", [
    ["search", "loss", "flat"], ["--kb", "DIR", "search", "loss"], ["search", "loss", "--kb", "DIR", "--json"],
    ["search", "-n", "3", "loss"], ["search", "loss", "--limit=4", "--area", "numerics", "--tag", "amp"],
    ["search", "--", "-100", "labels"], ["search", "x", "-n=3"], ["search", "x", "--lexical", "--json"],
])
def test_quick_search_parser_agrees_with_argparse(argv):
    from kb_tools.cli import build_parser
    from kb_tools.fastpath import quick_search_args
    quick = quick_search_args(argv)
    full = vars(build_parser("search").parse_args(argv))
    assert quick == {k: v for k, v in full.items() if k in quick}
    assert set(quick) == set(full) - {"command", "func"}  # every option of the one declaration


@pytest.mark.parametrize("argv", [
    ["search"], ["search", "-h"], ["search", "x", "--limit", "many"], ["search", "x", "--area", "nowhere"],
    ["search", "x", "--bogus"], ["show", "x"], ["--json", "search", "x"], [], ["search", "x", "--limit"],
])
def test_quick_search_parser_leaves_everything_else_to_argparse(argv):
    from kb_tools.fastpath import quick_search_args
    assert quick_search_args(argv) is None


@pytest.mark.parametrize("value", [
    [], {}, [{"id": "a", "score": 53.4, "ok": True, "none": None, "n": 3}],
    {"text": 'quote " backslash \\ tab \t nl \n bell \x07 ü 中 \u2028 end', "nested": {"l": [1, [2, {}]]}},
])
def test_json_writer_round_trips(value):
    from kb_tools.commands.output import to_json
    text = to_json(value)
    assert json.loads(text) == value
    if "text" not in value:  # control characters are escaped differently but equally validly
        assert text == json.dumps(value, indent=2, ensure_ascii=False)


def test_help_lists_every_command():
    r = kb("--help")
    assert r.returncode == 0
    for command in ("check", "search", "show", "snippet", "list"):
        assert command in r.stdout


def test_non_editable_install_uses_bundled_kb(tmp_path):
    """`pip install .` bundles kb/ and evidence/ so the CLI works from any directory."""
    wheel_dir = tmp_path / "wheel"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheel_dir), ROOT], capture_output=True, text=True)
    if built.returncode != 0 and "hatchling" in built.stderr:
        pytest.skip("hatchling is not installed in this environment")
    assert built.returncode == 0, built.stderr
    wheel = next(wheel_dir.glob("*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("kb_tools/_data/kb/entries/") for n in names)
    assert "kb_tools/_data/kb/verified/results.json" in names, "the verified snippet runs are not in the wheel"
    assert any(n.endswith(".data/scripts/kb") for n in names), "the kb launcher is not in the wheel"
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(target)}
    env.pop("KB_PATH", None)
    r = subprocess.run([sys.executable, "-m", "kb_tools", "list", "--json"], capture_output=True, text=True,
                       cwd=str(tmp_path), env=env)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)) >= 5


def test_kb_option_works_after_the_command_too(fixture_kb):
    r = kb("search", "loss flat", "--kb", fixture_kb, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)[0]["id"] == "alpha-bug"


def test_only_the_named_command_is_built():
    from kb_tools.cli import build_parser, command_named
    assert command_named(["--kb", "search", "show", "x"]) == "show"   # "search" is --kb's value
    assert command_named(["search", "loss"]) == "search"
    assert command_named(["frobnicate"]) is None and command_named([]) is None
    choices = build_parser("search")._subparsers._group_actions[0].choices
    assert list(choices) == ["search"]


def test_show_lists_each_citation_with_why_it_is_cited(fixture_kb):
    r = kb("--kb", fixture_kb, "show", "alpha-bug")
    assert r.returncode == 0 and "Evidence\n- q-one: It states the cause this entry describes.\n" in r.stdout, r.stdout
    r = kb("--kb", fixture_kb, "show", "alpha-bug", "--json")
    assert json.loads(r.stdout)["evidence"] == [{"quote": "q-one", "supports": "It states the cause this entry describes."}]


def test_kb_mcp_without_the_mcp_package_is_a_one_line_error(fixture_kb, monkeypatch, capsys):
    from kb_tools import cli

    class NoMCP:  # an environment without the mcp package: `import mcp...` fails as it would there
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name == "mcp" or name.startswith("mcp."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    for name in [m for m in sys.modules if m in ("mcp", "kb_tools.mcp_server") or m.startswith("mcp.")]:
        monkeypatch.delitem(sys.modules, name)  # restored after the test
    monkeypatch.setattr(sys, "meta_path", [NoMCP(), *sys.meta_path])
    code = cli.main(["--kb", fixture_kb, "mcp"])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    # kb-tools is not on PyPI: the command names the pip of the interpreter that runs kb, and the SDK
    assert err == (f"kb: the MCP server needs the `mcp` package (mcp is missing): "
                   f"{sys.executable} -m pip install 'mcp>=2.3,<3'\n")


def test_kb_mcp_help_says_how_to_install_the_sdk_without_the_unpublished_extra():
    r = kb("mcp", "--help")
    assert r.returncode == 0 and "kb-tools[mcp]" not in r.stdout
    assert "python -m pip install 'mcp>=2.3,<3'" in " ".join(r.stdout.split())


def test_kb_mcp_help_says_what_it_serves_and_where_the_tools_are_listed():
    """The tool list is stated once, by the server (README's list is generated from it)."""
    r = kb("mcp", "--help")
    assert r.returncode == 0
    for said in ("search, show, context, lint", "kb://entries/ID", "README"):
        assert said in " ".join(r.stdout.split())


def test_check_reports_a_dead_entry_mention_in_one_line(tmp_path):
    kb_dir = make_kb(tmp_path)
    write_entry(tmp_path, entry("mentions", check="It differs from `alpha-bugg`, see beta-bug."))
    r = kb("--kb", str(kb_dir), "check", env={"KB_NO_CACHE": "1"})
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    (line,) = [ln for ln in r.stdout.splitlines() if "KB025" in ln]
    assert re.match(r"kb/entries/loss/mentions\.yaml:\d+: KB025 check: names 'alpha-bugg', which is no entry's id "
                    r"or alias \(did you mean 'alpha-bug'\?\)$", line), line


def test_a_query_piped_to_dash_ranks_as_the_same_words_given_as_arguments(fixture_kb):
    """`pbpaste | kb search -`: a pasted report needs no shell quoting, and ranks exactly as if quoted."""
    report = 'my "loss" is flat\nafter `epoch 3`; it\'s stuck $HOME\n'
    quoted = kb("--kb", fixture_kb, "search", report, "--json")
    piped = kb("--kb", fixture_kb, "search", "-", "--json", stdin=report)
    assert piped.returncode == quoted.returncode == 0 and json.loads(piped.stdout) == json.loads(quoted.stdout) != []
    context = kb("--kb", fixture_kb, "context", "-", "--json", stdin=report)
    assert context.returncode == 0 and json.loads(context.stdout) == json.loads(
        kb("--kb", fixture_kb, "context", report, "--json").stdout)
    empty = kb("--kb", fixture_kb, "search", "-", stdin="")
    assert empty.returncode == 2 and empty.stderr.startswith("kb: empty query") and empty.stderr.count("\n") == 1
    binary = subprocess.run([sys.executable, "-m", "kb_tools", "--kb", fixture_kb, "search", "-"],
                            input=b"\xff\xfe loss", capture_output=True, cwd=ROOT, check=False)
    assert binary.returncode == 2 and binary.stderr == b"kb: standard input: not UTF-8 text (invalid start byte)\n"
