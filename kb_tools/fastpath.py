"""The start-up fast path of `kb`: what runs before the command is known.

`kb search` is typed many times a day and called by coding agents in loops, so a
cached search must cost little more than Python's own start-up. Three things here
exist only for that, and this module is the fence around them: nothing in it may
import argparse, re or json (each costs more than the search itself; a test
checks that a plain search imports none of them).

- `SEARCH_OPTIONS`: the one declaration of `kb search`'s options. The quick
  parser below reads it, and cli.py builds the argparse parser from it, so the
  two cannot disagree.
- `quick_search_args`: reads a well-formed `kb search ...` call without argparse;
  anything else (help, a mistake, another command) goes to argparse.
- `to_json`: writes `--json` output without the json module.
- `launch`: what bin/kb runs (a launcher of its own: a generated entry point
  imports `re`).
"""
from __future__ import annotations

from .model import AREAS

# kb search's options: (flags, attribute, value type or "flag", default, help). "area" values are AREAS.
SEARCH_OPTIONS = (
    (("--limit", "-n"), "limit", int, 10, "at most this many results (default 10)"),
    (("--area",), "area", "area", None, "only entries of this area"),
    (("--tag",), "tag", str, None, "only entries with this tag"),
    (("--json",), "json", "flag", False, "a JSON array: id, title, area, score, matched, low_confidence"),
    (("--lexical",), "lexical", "flag", False,
     "rank by words only (BM25 with synonyms), without the sentence embeddings"),
    (("--from-lint",), "from_lint", str, None, "instead of a query: the entries for what `kb lint` finds in FILE"),
)
_VALUED = {flag: (name, kind) for flags, name, kind, _, _ in SEARCH_OPTIONS if kind != "flag" for flag in flags}
_FLAGS = {flag: name for flags, name, kind, _, _ in SEARCH_OPTIONS if kind == "flag" for flag in flags}


def quick_search_args(argv):
    """The arguments of a plain `kb search ...` call as {attribute: value}, read without
    argparse; None for anything else, which then goes to argparse so that its messages
    stay the only ones users see."""
    args = {name: default for _, name, _, default, _ in SEARCH_OPTIONS}
    args.update(kb=None, query=[])
    tokens, command, only_words = list(argv), None, False
    while tokens:
        token = tokens.pop(0)
        if only_words or not token.startswith("-") or token == "-":
            if command is None:
                if token != "search":
                    return None
                command = token
            else:
                args["query"].append(token)
        elif token == "--" and command:
            only_words = True
        elif token in _FLAGS and command:
            args[_FLAGS[token]] = True
        else:
            flag, has_value, value = token.partition("=")
            if flag == "--kb":
                kind, name = str, "kb"
            elif flag in _VALUED and command:
                name, kind = _VALUED[flag]
            else:
                return None
            if not has_value:
                if not tokens:
                    return None
                value = tokens.pop(0)
            if kind == "area":
                if value not in AREAS:
                    return None
            else:
                try:
                    value = kind(value)
                except ValueError:
                    return None
            args[name] = value
    if command is None or not args["query"]:
        return None
    return args


_JSON_ESCAPES = {**{c: f"\\u{c:04x}" for c in range(0x20)}, ord('"'): '\\"', ord("\\"): "\\\\",
                 0x2028: "\\u2028", 0x2029: "\\u2029"}


def to_json(value, indent: int = 2, depth: int = 0) -> str:
    """JSON text for plain data (dict, list, str, int, float, bool, None), indented like json.dumps.

    Written out here because importing the json package (which imports `re`)
    costs more than a cached search; tests check it against json.loads.
    """
    pad, inner = " " * (indent * depth), " " * (indent * (depth + 1))
    if isinstance(value, str):
        return '"' + value.translate(_JSON_ESCAPES) + '"'
    if value is True or value is False or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, (int, float)):
        if value != value or value in (float("inf"), float("-inf")):
            return "null"
        return repr(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = (f"{inner}{to_json(str(k))}: {to_json(v, indent, depth + 1)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(f"{inner}{to_json(v, indent, depth + 1)}" for v in value) + f"\n{pad}]"
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def launch() -> int:
    """bin/kb's entry point: a plain search skips argparse, everything else gets it."""
    import sys

    from .cli import main
    return main(sys.argv[1:])
