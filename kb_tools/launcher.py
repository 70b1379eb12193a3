"""What bin/kb runs: a plain search through the fast path (neither argparse nor the other
commands are imported), everything else through cli.main. A launcher of its own because a
generated console-script entry point imports `re`."""
from __future__ import annotations

import sys

from kb_tools.commands.output import guarded
from kb_tools.fastpath import run_quick_search


def launch() -> int:
    """bin/kb's entry point: a plain search runs from here (neither argparse nor cli.py's other
    commands are imported); everything else goes to cli.main."""
    argv = sys.argv[1:]
    code = guarded(lambda: run_quick_search(argv))
    if code is None:  # not a plain search
        from kb_tools.cli import main
        return main(argv)
    return code
