"""What commands share beyond their output: the KB loaded (and refused when invalid), an entry named
by id or alias, the copy installed with the package never written, the options every command
has, and the argparse parser that fails in one line."""
from __future__ import annotations

import os
import sys

from kb_tools.commands.output import fail_if_invalid
from kb_tools.core.util import KBError, UsageError


def load_kb_checked(args, require_clean: bool = True):
    """The KB `--kb` (or the default) names; an invalid one stops the command unless `require_clean`
    is off (kb check and kb verify report every problem themselves)."""
    from kb_tools.core.load import load_kb
    kb = load_kb(args.kb)
    if require_clean:
        fail_if_invalid(kb.problems)
    return kb


def entry_named(kb, name: str):
    return kb.entry_named(name)


def refuse_bundled(root: str) -> None:
    """Commands that write into the KB never write into the copy installed with the package."""
    from kb_tools.core.locate import bundled_kb
    if bundled_kb(root):
        raise KBError(f"{root}: the copy of the KB installed with the package is never written; "
                      f"run kb from a checkout or pass --kb DIR")


def add_kb_option(p, top_level: bool = False) -> None:
    """--kb on the top-level parser, and on each command (where it only counts when given)."""
    import argparse
    p.add_argument("--kb", metavar="DIR", default=None if top_level else argparse.SUPPRESS,
                   help="KB directory (default: $KB_PATH, else this checkout's or the bundled KB)")


def add_json_option(p, what: str) -> None:
    """`--json` on every command that has it, with one meaning: `what`, as JSON on stdout, nothing else."""
    p.add_argument("--json", action="store_true", help=f"{what}, as JSON on stdout")


def parser_class():
    """argparse's parser, made to fail in one line; argparse is imported only when a command needs it."""
    import argparse

    class Formatter(argparse.HelpFormatter):
        """Told the terminal width, so that it skips argparse's own `import shutil` per argument."""

        def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
            if width is None:
                try:
                    width = int(os.environ.get("COLUMNS") or os.get_terminal_size(sys.__stdout__.fileno()).columns)
                except (ValueError, OSError, AttributeError):
                    width = 80
                width = max(width - 2, 20)
            super().__init__(prog, indent_increment, max_help_position, width)

    class Parser(argparse.ArgumentParser):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("formatter_class", Formatter)
            super().__init__(*args, **kwargs)

        def error(self, message):  # one line, exit 2, no usage dump
            raise UsageError(f"{self.prog}: {message}")

    return Parser
