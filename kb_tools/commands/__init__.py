"""`kb`'s commands, one module per command: where to add one.

A command module holds NAME, SUMMARY (one line for `kb --help`), DESCRIPTION (its own --help's
text, or None for the summary), `add_arguments(parser)` and `run(args) -> exit code` (a command
with sub-actions, like `evidence`, sets each action's function with `set_defaults(func=...)`).
ORDER is the registry: cli.py builds the parser from it, one command at a time (only the one
asked for is imported, so a command's imports cost nothing to the others), and README's usage
blocks are generated from the parsers it builds.
"""
from __future__ import annotations

from importlib import import_module

ORDER = ("check", "search", "show", "lint", "snippet", "run", "list", "eval", "verify", "build", "serve",
         "context", "export-skill", "mcp", "evidence", "watch")


def module(name: str):
    """The module of the command called `name` (one of ORDER)."""
    return import_module(f"{__name__}.{name.replace('-', '_')}")
