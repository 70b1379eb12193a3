"""The start-up fast path of `kb`: a plain `kb search ...` read without argparse.

`kb search` is typed many times a day and called by coding agents in loops, so a
cached search must cost little more than Python's own start-up. What is here
exists for that, and this module is the fence around it: nothing on the path of a
plain search (this module, commands/search.py and commands/output.py) may import
argparse, re or json (each costs more than the search itself), and a plain search
imports neither cli.py nor the KB parser and schema (core/load.py, core/model.py);
a test checks both.

- `quick_search_args`: reads a well-formed `kb search ...` call without argparse,
  from the one declaration of its options (commands/search.py's SEARCH_OPTIONS, which
  the argparse parser is built from too, so the two cannot disagree); anything else
  (help, a mistake, another command) goes to argparse.
- `run_quick_search`: what launcher.py and cli.main call first.
"""
from __future__ import annotations


from kb_tools.commands.search import SEARCH_OPTIONS

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


def run_quick_search(argv):
    """The exit code of `argv` run as a plain `kb search`, or None when argv is something
    else (help, a mistake, another command), which argparse then reads."""
    quick = quick_search_args(argv)
    if quick is None:
        return None
    from types import SimpleNamespace

    from kb_tools.commands.search import run
    return run(SimpleNamespace(**quick))
