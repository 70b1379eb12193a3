"""`kb`: a thin command line over the kb_tools library, built from the command registry
(kb_tools/commands/: one module per command).

Exit codes: 0 success, 1 not found / invalid KB / a check failed, 2 usage error.
A user's mistake prints one line on stderr, never a traceback.
"""
from __future__ import annotations

import sys

from kb_tools import commands
from kb_tools.commands.common import add_kb_option, parser_class
from kb_tools.commands.output import guarded
from kb_tools.fastpath import run_quick_search


def command_named(argv) -> str | None:
    """The subcommand that `argv` names, found without building any parser."""
    after_kb = False
    for token in argv:
        if after_kb:
            after_kb = False
        elif token == "--kb":
            after_kb = True
        elif not token.startswith("-"):
            return token if token in commands.ORDER else None
    return None


def build_parser(only: str | None = None):
    """The `kb` parser; with `only`, just that subcommand is built.

    argparse spends longer constructing every subcommand than a cached search
    takes, so a run builds (and imports) the one it was asked for (all of them for
    --help or a mistyped command, so the error can list the choices).
    """
    Parser = parser_class()
    parser = Parser(prog="kb", description="Search and check a knowledge base for debugging PyTorch training.",
                    epilog="Exit codes: 0 ok, 1 not found / invalid / check failed, 2 usage error.")
    add_kb_option(parser, top_level=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name in commands.ORDER:
        if only not in (None, name):
            continue
        module = commands.module(name)
        p = sub.add_parser(name, help=module.SUMMARY, description=module.DESCRIPTION or module.SUMMARY)
        module.add_arguments(p)
        if getattr(module, "run", None) is not None:
            add_kb_option(p)
            p.set_defaults(func=module.run)
    return parser


def main(argv=None) -> int:
    """`kb` with `argv` (default sys.argv[1:]): a plain search through the quick parser, anything else through argparse."""
    argv = sys.argv[1:] if argv is None else argv

    def run() -> int:
        code = run_quick_search(argv)
        if code is not None:
            return code
        args = build_parser(command_named(argv)).parse_args(argv)
        return args.func(args)
    return guarded(run)


if __name__ == "__main__":
    sys.exit(main())
