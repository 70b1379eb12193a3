"""The reference parts of README.md and CONTRIBUTING.md, generated from the code that enforces them.

A fact stated twice drifts: the field tables come from load.py's schema, the
code tables from model.py's one list of diagnostics, each command's usage from
its argparse parser, and the shipped counts from the KB itself. Each generated
block sits between `<!-- begin generated: NAME -->` and `<!-- end generated: NAME -->`;
`python scripts/generate_docs.py` rewrites the blocks and `--check` fails when a
file differs from what the code says (a test runs the check, so CI does too).
"""
from __future__ import annotations

import difflib
import os

from .util import KBError, write_atomic

BEGIN, END = "<!-- begin generated: {} -->", "<!-- end generated: {} -->"
HELP_COLUMNS = 100  # the width usage text is rendered at, whatever the terminal


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _kind(kind) -> str:
    """A schema kind as the tables show it."""
    if isinstance(kind, tuple):
        return "one of " + ", ".join(f"`{v}`" for v in kind)
    return {"str": "str", "list": "list of str", "bool": "bool", "mapping": "mapping",
            "lines": "`[first, last]`", "figures": "mapping of str to quoted str",
            "citations": "list of `{quote, supports}`", "fix_pair": "`{before, after}` of code"}[kind]


def field_table(spec: dict) -> str:
    rows = ["| field | type | required | meaning |", "|---|---|---|---|"]
    rows += [f"| `{name}` | {_cell(_kind(kind))} | {_cell(req)} | {_cell(meaning)} |"
             for name, (kind, req, meaning) in spec.items()]
    return "\n".join(rows)


def code_table(codes: dict, name_heading: str) -> str:
    rows = [f"| code | {name_heading} | meaning |", "|---|---|---|"]
    rows += [f"| `{code}` | `{name}` | {_cell(meaning)} |" for code, (name, meaning) in codes.items()]
    return "\n".join(rows)


def command_usage() -> str:
    """`kb --help` and every command's `--help`, as a user at a 100-column terminal sees them."""
    from . import cli
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(HELP_COLUMNS + 2)  # the formatter keeps two columns of margin
    try:
        parts = [cli.build_parser().format_help().rstrip()]
        for name in cli.COMMANDS:
            parser = cli.build_parser(name)
            sub = next(a for a in parser._actions if a.dest == "command").choices[name]
            nested = [a for a in sub._actions if getattr(a, "choices", None) and a.dest == "evidence_command"]
            parts.append(sub.format_help().rstrip())
            for action in nested:
                parts.extend(p.format_help().rstrip() for p in action.choices.values())
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved
    return "```text\n" + "\n\n".join(parts) + "\n```"


def shipped_counts(kb) -> str:
    return f"```\n$ kb check\nok: {len(kb.entries)} entries, {len(kb.quotes)} quotes, {len(kb.sources)} sources\n```"


def shipped_sources(kb) -> str:
    kinds = {s.kind for s in kb.sources.values()}
    torch_objects = sum(1 for s in kb.sources.values() if s.package == "torch")
    git = sum(1 for s in kb.sources.values() if s.repo)
    web = sum(1 for s in kb.sources.values() if not s.repo and not s.package)
    return (f"The shipped KB has {len(kb.quotes)} quotes from {len(kb.sources)} sources, "
            f"{'all primary' if kinds == {'primary'} else 'primary and secondary'}: {git} captured whole "
            f"or as excerpts from their git repositories, {web} web pages, and {torch_objects} torch objects "
            f"(each also cached as an `evidence/torch-*.md` file, for reading and for machines without torch).")


def blocks(kb) -> dict:
    """Every generated block's text, by name."""
    from .load import ENTRY_FIELDS, QUOTE_FIELDS, SOURCE_FIELDS
    from .model import CHECK_CODES, VERIFY_CODES
    return {
        "entry-fields": field_table(ENTRY_FIELDS),
        "quote-fields": field_table(QUOTE_FIELDS),
        "source-fields": field_table(SOURCE_FIELDS),
        "check-codes": code_table(CHECK_CODES, "name"),
        "verify-codes": code_table(VERIFY_CODES, "kind"),
        "command-usage": command_usage(),
        "shipped-counts": shipped_counts(kb),
        "shipped-sources": shipped_sources(kb),
    }


DOC_FILES = ("README.md", "CONTRIBUTING.md")


def fill(text: str, generated: dict, path: str = "") -> str:
    """`text` with every generated block replaced by its current content.
    A begin marker without its end, or a block name the code does not generate, is a KBError."""
    out, at = [], 0
    while True:
        start = text.find("<!-- begin generated: ", at)
        if start == -1:
            out.append(text[at:])
            return "".join(out)
        name = text[start + len("<!-- begin generated: "):text.find(" -->", start)]
        if name not in generated:
            raise KBError(f"{path}: unknown generated block '{name}' (known: {', '.join(sorted(generated))})")
        end = text.find(END.format(name), start)
        if end == -1:
            raise KBError(f"{path}: generated block '{name}' has no `{END.format(name)}`")
        out.append(text[at:start])
        out.append(f"{BEGIN.format(name)}\n{generated[name]}\n")
        at = end


def update_docs(root: str, kb, check: bool = False) -> list:
    """Bring each doc file's generated blocks up to date (or, with `check`, only compare).
    Returns [(path, unified diff)] of the files that differed."""
    generated = blocks(kb)
    changed = []
    for name in DOC_FILES:
        path = os.path.join(root, name)
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise KBError(f"{path}: cannot read: {exc.strerror or exc}") from None
        new = fill(text, generated, name)
        if new != text:
            diff = "".join(difflib.unified_diff(text.splitlines(True), new.splitlines(True),
                                                f"{name} (as written)", f"{name} (as generated)"))
            changed.append((name, diff))
            if not check:
                write_atomic(path, new)
    return changed
