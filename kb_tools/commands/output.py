"""What every command prints and how it ends: exit codes, colour, `--json` output, the one place a
failure becomes a line on stderr (`guarded`), and a query read from standard input.

On the start-up fast path of `kb search` (see fastpath.py): no argparse, re or json here;
`to_json` writes JSON itself because importing the json package costs more than a search.
"""
from __future__ import annotations

import os
import sys

from kb_tools.core.util import KBError, UsageError, invalid_kb

EXIT_OK, EXIT_FAIL = 0, 1  # and 2 for a usage error: util.UsageError carries it


def use_colour(stream) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def style(text: str, code: str, stream=None) -> str:
    return f"\033[{code}m{text}\033[0m" if use_colour(stream or sys.stdout) else text


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


def print_json(value) -> None:
    sys.stdout.write(to_json(value) + "\n")


def fail_if_invalid(problems) -> None:
    """An invalid KB stops a command with its first problem, in one line."""
    message = invalid_kb(problems)
    if message:
        raise KBError(message)


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
