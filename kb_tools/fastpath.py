"""The start-up fast path of `kb`: what runs before the command is known, and the search command.

`kb search` is typed many times a day and called by coding agents in loops, so a
cached search must cost little more than Python's own start-up. What is here
exists for that, and this module is the fence around it: nothing in it may
import argparse, re or json (each costs more than the search itself), and a
plain search imports neither cli.py nor the KB parser and schema (load.py,
model.py); a test checks both.

- `SEARCH_OPTIONS`: the one declaration of `kb search`'s options. The quick
  parser below reads it, and cli.py builds the argparse parser from it, so the
  two cannot disagree.
- `quick_search_args`: reads a well-formed `kb search ...` call without argparse;
  anything else (help, a mistake, another command) goes to argparse.
- `to_json`: writes `--json` output without the json module.
- `cmd_search` and the output helpers it shares with cli.py; `run_quick_search`,
  which cli.main calls too; `guarded`, the one place a command's failure becomes
  a line on stderr and an exit code.
- `launch`: what bin/kb runs (a launcher of its own: a generated entry point
  imports `re`).
"""
from __future__ import annotations

import os
import sys

from kb_tools.core.util import KBError, UsageError

# kb search's options: (flags, attribute, value type or "flag", default, help). "area" values are model.AREAS.
SEARCH_OPTIONS = (
    (("--limit", "-n"), "limit", int, 10, "at most this many results (default 10)"),
    (("--area",), "area", "area", None, "only entries of this area"),
    (("--tag",), "tag", str, None, "only entries with this tag"),
    (("--json",), "json", "flag", False, "a JSON array: id, title, area, score, matched, low_confidence"),
    (("--lexical",), "lexical", "flag", False,
     "rank by words only (BM25 with synonyms), without the sentence embeddings"),
    (("--from-lint",), "from_lint", str, None, "instead of a query: the entries for what `kb lint` finds in FILE (- reads standard input)"),
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
                from kb_tools.core.model import AREAS  # only here: a plain search does not import the schema
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


# ---------------------------------------------------------------- the search command

EXIT_OK, EXIT_FAIL = 0, 1  # and 2 for a usage error: util.UsageError carries it


def use_colour(stream) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def style(text: str, code: str, stream=None) -> str:
    return f"\033[{code}m{text}\033[0m" if use_colour(stream or sys.stdout) else text


def print_json(value) -> None:
    sys.stdout.write(to_json(value) + "\n")


def fail_if_invalid(problems) -> None:
    """An invalid KB stops a command with its first problem, in one line."""
    if problems:
        more = f" (and {len(problems) - 1} more; run `kb check`)" if len(problems) > 1 else ""
        raise KBError(f"the KB is invalid: {problems[0]}{more}")


STDIN_QUERY_BYTES = 1 << 20  # more than any query may hold (search.MAX_QUERY_CHARS), so that its message is the one shown


def query_text(words: list) -> str:
    """The query the words make; a lone `-` reads it from standard input instead, so that a
    pasted report or log needs no shell quoting (`pbpaste | kb search -`)."""
    if words != ["-"]:
        return " ".join(words)
    data = sys.stdin.buffer.read(STDIN_QUERY_BYTES + 1)
    if len(data) > STDIN_QUERY_BYTES:
        raise UsageError(f"standard input: larger than {STDIN_QUERY_BYTES >> 20} MB; a query is a few lines")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"standard input: not UTF-8 text ({exc.reason})") from None


def cmd_search(args) -> int:
    """Rank entries for a symptom query."""
    from kb_tools.search.index import dense_unavailable, load_index
    from kb_tools.search.rank import search
    query = query_text(args.query)
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    if args.from_lint:
        from kb_tools.cli import search_from_lint
        return search_from_lint(args, query)
    if not query.strip():
        raise UsageError("empty query: describe what you see, e.g. kb search \"loss flat\" (or give --from-lint FILE)")
    index = load_index(args.kb, dense=not args.lexical)
    fail_if_invalid(index.header["problems"])
    hits = search(index, query, limit=args.limit, area=args.area, tag=args.tag, dense=not args.lexical)
    why = None if args.lexical else dense_unavailable(index)
    if why:
        print(f"kb: lexical ranking only: {why}", file=sys.stderr)
    if args.json:
        print_json([h.to_json() for h in hits])
        return EXIT_OK
    if not hits:
        print("no entry shares a word with that query; try the words you see in the log, e.g. \"loss flat\"")
        return EXIT_OK
    width = max(len(h.id) for h in hits)
    for n, hit in enumerate(hits, 1):
        flag = "  (low confidence)" if hit.low_confidence else ""
        print(f"{n:2d}. {style(hit.id.ljust(width), '1')}  {hit.title}  [{hit.area}]  {hit.score:.0f}{flag}")
        print(f"    {style('matched:', '2')} {hit.matched}")
    return EXIT_OK


def guarded(command) -> int:
    """`command()`'s exit code, with every user-facing failure mapped to one line on stderr and its
    exit code (here and only here); never a traceback for a closed pipe, a full disk or Ctrl-C."""
    if sys.stdout is None or sys.stderr is None:  # started with a standard stream closed
        if sys.stderr is not None:
            print("kb: standard output is closed; nothing to write to", file=sys.stderr)
        return EXIT_FAIL
    try:
        code = command()
        sys.stdout.flush()  # a full disk or closed pipe shows here, not after main returns
        return code
    except KBError as exc:
        msg = str(exc)
        print(msg if msg.startswith("kb") else f"kb: {msg}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:  # the output cannot be written (a full disk, /dev/full)
        if exc.filename is not None:
            raise
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        print(f"kb: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        return 130


def run_quick_search(argv):
    """The exit code of `argv` run as a plain `kb search`, or None when argv is something
    else (help, a mistake, another command), which argparse then reads."""
    quick = quick_search_args(argv)
    if quick is None:
        return None
    from types import SimpleNamespace
    return cmd_search(SimpleNamespace(**quick))


def launch() -> int:
    """bin/kb's entry point: a plain search runs from here (neither argparse nor cli.py's other
    commands are imported); everything else goes to cli.main."""
    argv = sys.argv[1:]
    code = guarded(lambda: run_quick_search(argv))
    if code is None:  # not a plain search
        from kb_tools.cli import main
        return main(argv)
    return code
