"""`kb verify --fix-lines` on files it cannot edit safely: it refuses in one line and leaves the file
byte for byte, and never writes YAML that does not load back as the same quotes."""
from __future__ import annotations

from kb_tools import cli
from kb_tools.core import load
from kb_tools.core import util
from test_verify import QUOTE_FILE, make_kb


def quote_file(kb_dir, text):
    path = kb_dir / "quotes" / "guide.yaml"
    path.write_text(text)
    return path


def test_fix_lines_refuses_a_file_with_anchors_and_aliases(tmp_path, capsys):
    kb_dir = make_kb(tmp_path, [])
    text = (QUOTE_FILE.replace("lines: [40, 41]     # stale", "lines: &stale [40, 41]")
            .replace("lines: 3\n", "lines: *stale\n"))
    path = quote_file(kb_dir, text)
    assert cli.main(["--kb", str(kb_dir), "verify", "--fix-lines"]) == 1
    err = capsys.readouterr().err
    assert "did not fix lines in kb/quotes/guide.yaml: it uses YAML anchors or aliases" in err
    assert len(err.strip().splitlines()) == 1
    assert path.read_text() == text


def test_fix_lines_handles_a_tab_inside_a_flow_list(tmp_path, capsys):
    kb_dir = make_kb(tmp_path, [])
    path = quote_file(kb_dir, QUOTE_FILE.replace("lines: [40, 41]     # stale", "lines: [40,\t41]     # stale"))
    assert cli.main(["--kb", str(kb_dir), "verify", "--fix-lines"]) == 0, capsys.readouterr()
    assert "lines: [12, 12]     # stale" in path.read_text()
    assert {q.id: q.lines for q in load.load_kb(str(kb_dir), use_cache=False).quotes.values()}["flow"] == [12, 12]


def test_fix_lines_in_a_folder_that_cannot_be_written(tmp_path, capsys, monkeypatch):
    kb_dir = make_kb(tmp_path, [])
    path = quote_file(kb_dir, QUOTE_FILE)

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(util, "write_atomic", read_only)
    assert cli.main(["--kb", str(kb_dir), "verify", "--fix-lines"]) == 1
    err = capsys.readouterr().err
    assert "did not fix lines in kb/quotes/guide.yaml: it cannot be written (Permission denied)" in err
    assert path.read_text() == QUOTE_FILE


def test_an_edit_is_written_only_if_it_loads_back_with_nothing_but_lines_changed():
    from kb_tools.verify.quotes import _same_but_lines
    _, loader = load.yaml_line_loader()
    fixed = QUOTE_FILE.replace("lines: [40, 41]     # stale", "lines: [12, 12]     # stale")
    assert _same_but_lines(QUOTE_FILE, fixed, {"flow": (12, 12)}, loader)
    assert not _same_but_lines(QUOTE_FILE, fixed, {"flow": (12, 13)}, loader)
    assert not _same_but_lines(QUOTE_FILE, fixed.replace("id: block", "id: blocks"), {"flow": (12, 12)}, loader)
    assert not _same_but_lines(QUOTE_FILE, fixed.replace("lines: 3", "lines: [3"), {"flow": (12, 12)}, loader)
    assert not _same_but_lines(QUOTE_FILE, fixed + "extra: 1\n", {"flow": (12, 12)}, loader)
