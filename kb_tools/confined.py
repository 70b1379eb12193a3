"""`kb lint` for a server that others call (`kb mcp`): it reads only regular files inside the folders
it is given, never waits on a FIFO or a device, and analyses code in a child process that is stopped
after LINT_SECONDS, so no call can hold the server.

The command line keeps reading what its user names (lint.py); this module is what a caller that is
not the machine's user gets. It imports only the standard library and lint.py, so the child starts
in a few tens of milliseconds.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from urllib.parse import unquote, urlparse

from kb_tools import PACKAGE_DIR
from kb_tools.core.util import KBError

# A training script takes well under a second (a 1.4 MB module of torch's own, 3 s), but lint.py's
# rules are quadratic in the loops of a scope: 1 MB of small loops would take minutes.
LINT_SECONDS = 10


def root_folders(uris) -> list:
    """The folders named by file:// root URIs, symlinks resolved; other schemes are skipped."""
    out = []
    for uri in uris:
        parsed = urlparse(str(uri))
        if parsed.scheme == "file" and parsed.netloc in ("", "localhost") and parsed.path:
            out.append(os.path.realpath(unquote(parsed.path)))
    return out


def inside(real: str, roots) -> bool:
    """Whether the resolved path `real` is one of `roots` or lies under one."""
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def refusal(real: str, roots) -> str | None:
    """Why the resolved path `real` may not be read as a script: outside the roots, missing, or not
    a regular file (a folder, FIFO, device, socket); None when it may. Never opens it."""
    if not inside(real, roots):
        return "outside the allowed roots"
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        return "no such file or folder"
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a socket"
            if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "special")
    return f"not a regular file ({kind})"


def read_script(shown: str, real: str) -> str:
    """The UTF-8 text of the regular file `real` (`shown` names it in messages). It is opened without
    blocking and without following a link, and checked again once open, so a FIFO, device or link put
    in its place after the checks is refused, never waited on."""
    from kb_tools.lint.engine import MAX_SOURCE_BYTES
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(real, flags)
        with open(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise KBError(f"{shown}: not a regular file")
            data = fh.read(MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        raise KBError(f"{shown}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_SOURCE_BYTES:
        raise KBError(f"{shown}: larger than {MAX_SOURCE_BYTES >> 20} MB; not a training script")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KBError(f"{shown}: cannot read: not UTF-8 text ({exc.reason})") from None


def lint_text(text: str, shown: str) -> list:
    """`kb lint`'s findings in one script, as dicts, in this process; a script that does not parse
    is a KBError."""
    from kb_tools.lint.engine import lint_source
    try:
        return [f.to_dict() for f in lint_source(text, shown)]
    except SyntaxError as exc:
        raise KBError(f"{shown}:{exc.lineno or 0}: cannot parse: {exc.msg}") from None
    except RecursionError:
        raise KBError(f"{shown}: cannot parse: nested too deeply") from None


def confined_files(path: str, roots: list, whose: str) -> tuple:
    """([(shown, real)], skipped): the scripts `path` names, read only inside `roots` (`whose` says
    where those come from, in the message). A named path outside them, or neither a regular file
    nor a folder, is refused; a file found under a folder that resolves outside them (a symlink) or
    is not a regular file is skipped and listed as {"path", "reason"}."""
    from kb_tools.lint.engine import python_files
    if "\0" in path:
        raise KBError("`path` holds a NUL character")
    real = os.path.realpath(path)
    if not inside(real, roots):
        raise KBError(f"{path}: outside the folders this server may read: {', '.join(roots) or 'none'} ({whose})")
    why = refusal(real, roots)
    if why == "not a regular file (a folder)":
        names = python_files([path])
    elif why:
        raise KBError(f"{path}: {why}")
    else:
        names = [path]
    files, skipped = [], []
    for name in names:
        real = os.path.realpath(name)
        why = refusal(real, roots)
        if why:
            skipped.append({"path": name, "reason": why})
        else:
            files.append((name, real))
    return files, skipped


_CHILD = "import sys; sys.path.insert(0, sys.argv[1]); from kb_tools.confined import _child; _child()"


def lint_in_child(jobs: list, seconds: float = LINT_SECONDS) -> list:
    """The findings (dicts) for `jobs`, each {"path": shown, "code": text} or {"path": shown, "file":
    real}, analysed in a child process that is killed after `seconds`; its error is a KBError."""
    package_parent = os.path.dirname(PACKAGE_DIR)
    try:
        proc = subprocess.run([sys.executable, "-E", "-S", "-c", _CHILD, package_parent],
                              input=json.dumps(jobs).encode(), capture_output=True, timeout=seconds)
    except subprocess.TimeoutExpired:
        raise KBError(f"lint stopped after {seconds:g} s: too much code, or too many loops, for a server call; "
                      f"run `kb lint` on it at the command line") from None
    except OSError as exc:
        raise KBError(f"cannot start the lint process: {exc.strerror or exc}") from None
    try:
        answer = json.loads(proc.stdout)
    except ValueError:
        last = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        raise KBError(f"the lint process exited with status {proc.returncode}: {last[0]}") from None
    if "error" in answer:
        raise KBError(answer["error"])
    return answer["findings"]


def _child() -> None:
    """The child's side of lint_in_child: jobs as JSON on stdin, {"findings"} or {"error"} on stdout."""
    findings = []
    answer: dict
    try:
        for job in json.loads(sys.stdin.buffer.read()):
            text = job["code"] if "code" in job else read_script(job["path"], job["file"])
            findings.extend(lint_text(text, job["path"]))
        answer = {"findings": findings}
    except KBError as exc:
        answer = {"error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - a bug in a rule is one line to the caller, not a dead server
        answer = {"error": f"lint failed: {type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(answer))
