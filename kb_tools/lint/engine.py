"""`kb lint`: find the knowledge base's bugs in a training script by reading its code.

This module runs the rules (kb_tools/lint/rules/, one module per rule) over the facts
kb_tools/lint/analysis.py gathers once per file, and reports what they find.

Many entries describe a mistake that is visible in the source: a softmax fed to
CrossEntropyLoss, `zero_grad` between `backward` and `step`, `model.eval()` in
the loop with no `model.train()` after it. Each rule here has a code, detects one
entry's mistake and points at that entry (`kb show ENTRY`). The analysis is the
standard library's `ast` plus a light, per-function data flow: which names hold
losses, optimizers, schedulers, loaders, scalers and models, what a name was last
assigned from, and the order of calls inside a loop. It prefers silence to a
guess: a rule fires only when the code shows the mistake, so a clean report is
not a proof, but a finding is worth reading.
"""
from __future__ import annotations

import ast
import os
import sys
from dataclasses import asdict, dataclass

from kb_tools.core.util import UsageError, read_regular
from kb_tools.lint import rules
from kb_tools.lint.analysis import Analysis

# code -> (name, entry id, message), from the rule modules (kb_tools/lint/rules/, one per rule).
# The entry explains the cause, the fix and how to check.
RULE_MODULES = {m.CODE: m for m in rules.ALL}
RULES = {code: (m.NAME, m.ENTRY, m.MESSAGE) for code, m in RULE_MODULES.items()}
MAX_SOURCE_BYTES = 5 << 20
# Not a rule: a file that cannot be linted (not a regular file, unreadable, not Python) is reported in
# the findings' form, so one bad file neither hides the other files' findings nor passes unnoticed.
UNLINTABLE, UNLINTABLE_NAME = "KBL000", "cannot-lint"


@dataclass
class Finding:
    """One mistake found: where, which rule, what to read."""

    path: str
    line: int
    col: int
    code: str
    message: str
    entry: str | None  # None for UNLINTABLE: no entry explains a file that could not be read

    def __str__(self):
        more = f" (kb show {self.entry})" if self.entry else ""
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}{more}"

    def to_dict(self) -> dict:
        return {**asdict(self), "name": RULES[self.code][0] if self.code in RULES else UNLINTABLE_NAME}


def rules_for(entry_id: str) -> list:
    """The lint rules that detect an entry's mistake, as (code, name)."""
    return [(code, name) for code, (name, entry, _) in RULES.items() if entry == entry_id]


# ---------------------------------------------------------------- running

def _noqa(lines: list, line: int, code: str) -> bool:
    """`# kb: noqa` (every rule) or `# kb: noqa[KBL001, KBL007]` on the finding's line."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    at = text.find("# kb: noqa")
    if at == -1:
        return False
    rest = text[at + len("# kb: noqa"):]
    if not rest.startswith("["):
        return True
    return code in {c.strip() for c in rest[1:rest.find("]")].split(",")}


def lint_source(text: str, path: str = "<string>", select=None, ignore=None, project=None) -> list:
    """Every finding in one file's source, sorted by line. `project` (analysis.Project): the other
    files linted with it, whose functions its calls are followed into. Raises SyntaxError, also for
    code nested too deeply to parse or walk (the parser raises MemoryError, a walk RecursionError)."""
    try:
        try:
            tree = ast.parse(text, filename=path)
        except ValueError as exc:  # a null byte, before Python 3.12
            raise SyntaxError(str(exc), (path, 1, 1, None)) from None
        return _lint_tree(tree, text, path, select, ignore, project)
    except (RecursionError, MemoryError):
        raise SyntaxError("nested too deeply (Python cannot compile it either)", (path, 1, 1, None)) from None


def _lint_tree(tree, text: str, path: str, select, ignore, project=None) -> list:
    """lint_source on a parsed tree: each rule reads one Analysis of it."""
    lines = text.splitlines()
    found = {}

    def emit(node, code, **fill):
        if id(node) not in analysis.index.ids:
            return   # a node of another file the analysis followed a call into: that file reports its own
        name, entry, message = RULES[code]
        if (select and not any(code.startswith(s) for s in select)) or (ignore and any(code.startswith(s) for s in ignore)):
            return
        if _noqa(lines, node.lineno, code):
            return
        key = (node.lineno, node.col_offset + 1, code)
        found.setdefault(key, Finding(path, node.lineno, node.col_offset + 1, code, message.format(**fill), entry))

    analysis = Analysis(tree, project, text)
    for module in RULE_MODULES.values():
        module.check(analysis, emit)
    return [found[k] for k in sorted(found)]


STDIN, STDIN_NAME = "-", "<stdin>"  # the path that reads a script from standard input, and its name in findings


def python_files(paths, stdin: bool = False) -> list:
    """The .py files named or found under folders (hidden folders and virtualenvs skipped);
    with `stdin`, `-` stays in the list and stands for standard input (the command line's
    convention; never in a server whose standard input is its protocol)."""
    out = []
    for path in paths:
        if stdin and path == STDIN:
            out.append(path)
        elif os.path.isdir(path):
            for top, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("__pycache__", "node_modules")
                                 and not os.path.exists(os.path.join(top, d, "pyvenv.cfg")))
                out.extend(os.path.join(top, f) for f in sorted(files) if f.endswith(".py"))
        elif os.path.exists(path):
            out.append(path)
        else:
            raise UsageError(f"{path}: no such file or folder")
    return out


def decode_python(data: bytes) -> str:
    """A file's text as Python reads it: a UTF-8 BOM or a `# -*- coding: ... -*-` line chooses the
    encoding, UTF-8 otherwise. Raises SyntaxError (an unknown or conflicting encoding) or
    UnicodeDecodeError, as Python would refuse to run the file."""
    from importlib.util import decode_source
    return decode_source(data)


def _read_script(name: str) -> bytes:
    """A script's bytes; a FIFO or a device is refused by its type, before anything opens it
    (opening a FIFO blocks until a writer comes). Raises OSError or ValueError (too large)."""
    if name == STDIN:  # a script piped in, as `cat train.py | kb lint -`
        data = sys.stdin.buffer.read(MAX_SOURCE_BYTES + 1)
        if len(data) > MAX_SOURCE_BYTES:
            raise ValueError(f"larger than {MAX_SOURCE_BYTES >> 20} MB; not a training script")
        return data
    import stat
    if not stat.S_ISREG(os.stat(name).st_mode):
        raise OSError("not a regular file")
    try:
        return read_regular(name, MAX_SOURCE_BYTES)  # checks the type again: it may have changed since
    except ValueError:
        raise ValueError(f"larger than {MAX_SOURCE_BYTES >> 20} MB; not a training script") from None


def lint_file(name: str, select=None, ignore=None, project=None) -> list:
    """The findings in one file (STDIN: standard input); a file that cannot be read or parsed is
    one UNLINTABLE finding, at the line Python names when it has one."""
    path = STDIN_NAME if name == STDIN else name
    def unlintable(line, col, why) -> list:
        return [Finding(path, line or 1, col or 1, UNLINTABLE, why, None)]
    try:
        data = _read_script(name)
    except OSError as exc:
        return unlintable(1, 1, f"cannot read: {exc.strerror or exc}")
    except ValueError as exc:
        return unlintable(1, 1, f"cannot read: {exc}")
    try:
        return lint_source(decode_python(data), path, select, ignore, project)
    except UnicodeDecodeError as exc:
        return unlintable(1, 1, f"cannot parse: not UTF-8 text ({exc.reason} at byte {exc.start}) and no "
                                f"coding line names another encoding")
    except SyntaxError as exc:
        return unlintable(exc.lineno, exc.offset, f"cannot parse: {exc.msg}")


def lint_paths(paths, select=None, ignore=None, stdin: bool = False) -> list:
    """Findings for every Python file under `paths`; a file that cannot be read or parsed is an
    UNLINTABLE finding naming it (and the line), and the other files are still linted."""
    for code in list(select or []) + list(ignore or []):
        if not any(c.startswith(code) for c in RULES):
            raise UsageError(f"unknown rule code '{code}' (codes: {', '.join(RULES)})")
    names = python_files(paths, stdin)
    project = _project(paths, names) if len(names) > 1 else None
    return [f for name in names for f in lint_file(name, select, ignore, project)]


def _project(paths, names):
    """The files given together, as a Project: each under its module names (`engine` for engine.py,
    `util.misc` for util/misc.py under a folder given); a name two files share is left out."""
    from kb_tools.lint.analysis import Project
    roots = [p for p in paths if p != STDIN and os.path.isdir(p)]
    files, seen = {}, {}
    for name in names:
        if name == STDIN:
            continue
        try:
            text = decode_python(_read_script(name))
        except (OSError, ValueError, SyntaxError, UnicodeDecodeError):
            continue
        modules = {os.path.splitext(os.path.basename(name))[0]}
        for root in roots:
            rel = os.path.relpath(name, root)
            if not rel.startswith(".."):
                modules.add(os.path.splitext(rel)[0].replace(os.sep, "."))
        for module in modules:
            seen[module] = seen.get(module, 0) + 1
            files[module] = text
    return Project({m: t for m, t in files.items() if seen[m] == 1})


__all__ = ["RULES", "UNLINTABLE", "Finding", "lint_source", "lint_file", "lint_paths", "rules_for"]
